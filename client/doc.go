// Package client talks to a running cairn daemon from Go, the way cairnctl's operator
// commands do: it produces upserts and deletions, asks queries and waits for their
// attributions and audits on Kafka, verifies the signed audit chain, and reads the
// daemon's /status, /model and /audit/key over its guarded HTTP surface.
//
// # Inputs are validated before anything is sent
//
// Every event is encoded by package stream's encoders (stream.EncodeTrain,
// stream.EncodeQuery) under Config.Limits, the checks the daemon's decoders apply, so
// an event the daemon would dead-letter (an empty or over-long id, a non-finite value,
// a k above the limit, an unknown ranking name) is refused here with the
// *stream.RejectError that names the field (errors.Is(err, stream.ErrRejected)), and
// nothing is sent. Upserts and deletions go to the training topic keyed by their id
// (stream.CheckTrainKey holds by construction), so Kafka keeps every event of an id in
// one partition, in the order sent; queries go to the query topic keyed by their
// request id. A vector's width is checked against Limits.InputDim only when it is set:
// the daemon's width is that of its model, which the client does not load.
//
// # Answers are correlated by request id
//
// Ask and DeleteAndWait register their request with the client's reader of the answer
// topics (attributions, audits and dead letters) before they send, so an answer cannot
// be missed however fast it comes. The answer is the first message on the answer topic
// keyed by the request id whose "request" field is that id; a dead letter is matched to
// the message sent by topic, key, length and SHA-256 (or by the copied bytes from a
// daemon that keeps them), and returned as a *DeadLetterError (errors.Is(err,
// ErrDeadLettered)). Other messages are skipped. The wait for the answer is bounded by
// ctx and, once the request is sent, by Config.AnswerTimeout; running out of time is
// ErrNoAnswer. A Watcher does the same for a caller that reads the topics itself
// (Watcher.Await).
//
// # Audits
//
// VerifyAudits reads every retained record of the audit topic (up to the end offsets
// taken when it starts) and checks them as one hash chain (seqs 1..n without gaps,
// hash = SHA-256(prev_hash ‖ body), identical re-sent copies dropped and counted); with
// Keys, every record's Ed25519 signature must verify against the key its key_id names
// (package internal/auditsig), and a record whose top-level fields disagree with the
// body the chain covers is left out as forged. When retention removed the first
// records, a signed audit_checkpoint on the status topic anchors the chain instead of
// the zero hash.
//
// # A stopped daemon's files
//
// VerifyStore, ExportStored and CheckStore read the state file in the data directory
// of a stopped daemon: the audit chain, a model version, the whole file's check. The
// daemon holds the file's lock while it runs; they then fail after a short wait with
// an error matching ErrLocked instead of waiting for it.
//
// # Lifecycle and concurrency
//
// New opens no connection. A Client is safe for concurrent use: concurrent Asks and
// DeleteAndWaits share one reader of the answer topics, which hands each answer to the
// request it names (a request id may wait only once at a time). That reader, a
// goroutine and its Watcher, starts with the first request that waits and runs until
// Client.Close, which joins it (a reader that fails hands its error to the waiting
// requests and is started again by the next). A Watcher runs one reader goroutine from
// Watch until Close, which joins it. Close on a Client and on a Watcher is idempotent.
// Every method takes its context first and stops when it ends. Byte slices in returned values (Raw, Sent's
// Key and Value) belong to the caller; arguments are never modified.
//
// # HTTP
//
// The HTTP methods use the daemon's own client (internal/admin): the bearer token of
// HTTP.TokenFile (mode 0600 or stricter) is sent only over HTTPS or to a loopback
// host, HTTP.CAFile replaces the system roots (a bare host:port then means https),
// HTTP.CertFile and HTTP.KeyFile authenticate by mutual TLS, and redirects are not
// followed. Bodies are bounded (16 MiB, 512 MiB for /model) and must be JSON.
package client
