// Package ui serves cairn's read-only explanation and monitoring pages under /ui on
// the daemon's HTTP address (wherever the HTTP server binds: loopback by default).
//
// # Pages
//
//   - /ui, the overview: the daemon's summary and its recent time series as line charts
//     (ingest rate, stored points, pool size, the residual certificate tr R per view,
//     d_eff, refits, deletions, the share of certified answers and the query latency
//     p50/p99 of each interval), and links to the recent answers.
//   - /ui/answer/REQ, one answer: the query (a picture for image inputs, a feature
//     table for tabular ones), the top-K landmarks shown the same way with score,
//     interval and view, the best landmark below the cut, the verdict, the separation
//     and the fit floor, and a bar chart of the scores with their intervals and the cut.
//   - /ui/audits, the audit chain: each deletion with its model before and after, its
//     percentile and p-value, the status of the chain, and the key that signs each record
//     (Audit.SignatureOK is the signature as the daemon publishes it, recomputed and
//     verified under its key; the records on the topic are checked by cairnctl audit
//     verify).
//   - /ui/erasure/REQ, the erasure receipt of a request (package receipt), for a Source
//     that also implements Receipts: the subject's keyed hash, the times, what was
//     erased from the state file, the slot files, the broker (tombstone offsets) and
//     the models, the audit records with their checks, and the commands to check it
//     again. It prints on A4 without the navigation (the stylesheet's print rules);
//     WriteReceipt writes the same page as one self-contained file.
//
// # Contract
//
//   - Read only: GET and HEAD; any other method is 405 (the admin server's mux).
//   - Access is the admin server's: with http_auth set, every page needs the bearer
//     token, a client certificate or a session from the login page /ui/login, which
//     the admin server serves (internal/admin doc "UI login and sessions"); this
//     package never sees an unauthenticated request.
//   - A deleted point is never rendered. Every picture and every landmark on a page is
//     looked up at rendering time with Source.Point, which answers only for points
//     stored now; a landmark that is not is shown as "deleted point", without its id or
//     its input, and /ui/img/point/ID answers 404 for it. Answers are kept as emitted
//     (their ids are on the attributions topic already), but the page never shows more
//     of a deleted point than that it was deleted.
//   - Self-contained: the templates, the stylesheet and the icon are embedded (embed);
//     the charts are SVG drawn on the server and the pictures PNG made on the server.
//     Pages have no scripts. Every response carries CSP (no source but this origin's
//     images, stylesheet and form target), nosniff, DENY framing and no-referrer.
//   - Bounded memory: Recorder keeps at most its capacity of answers and its slots of
//     samples; nothing grows with uptime.
//   - Concurrency: Handler, Recorder and Series are safe for concurrent use; Source
//     implementations must be too.
package ui
