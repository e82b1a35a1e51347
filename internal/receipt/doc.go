// Package receipt builds the erasure receipt of one request: the page a data controller
// keeps to show that a data subject's points (or one point) were erased, and how to
// check it again. cairnd serves it at /ui/erasure/REQ (internal/ui) and cairnctl prints
// it (`cairnctl audit receipt`); both build it here from the same inputs, so they say
// the same thing.
//
// # What a receipt states
//
// From the audit records of the request (the records on the audit topic keyed by it:
// one, or one per part of an erasure of more than ingest.MaxErasurePoints points), as
// their bodies, the bytes the hash chain covers, say it:
//
//   - the request, its kind (a data subject's erasure, one point's deletion, an
//     unblock), the subject's keyed hash (never the subject) or the point's id, and
//     when it was requested (the request's Kafka timestamp), applied and completed
//     (the refit that removed the points from the model finished);
//   - what was erased and from where: the points, each with where its tombstone landed
//     on the training topic and that topic's cleanup policy, grouped by topic and
//     partition; the state file and the slot files, which the daemon erases in the
//     transaction that applies the request (storage's "Deletion and erasure"); the
//     model versions before and after;
//   - every audit record as read, with its seq (its position in the chain), hash and
//     signing key, and what the verifier found: whether its hash is SHA-256 of its
//     prev_hash and body (checked here), whether its signature verifies against the
//     pinned key and whether it is the record at its seq in a verified chain (the
//     caller's Verdict), and the chain as a whole (the caller's Chain);
//   - the commands that check it again (Input.Reverify).
//
// Verified is true only when every record of the request read is genuine and in the
// verified chain, the chain verifies, and no two different records claim one seq. A
// record that fails is listed with its problem, and its body is not used for the
// statements above while a genuine copy exists.
//
// # Contracts
//
// Build neither keeps nor modifies its input; the Receipt is the caller's. It holds no
// input data: audit bodies never do (ingest), and a receipt copies only ids, hashes,
// offsets, versions and times from them.
package receipt
