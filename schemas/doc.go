// Package schemas holds the JSON Schemas (draft 2020-12) of every JSON event on cairn's
// topics, embedded in the binary, and an HTTP handler that serves them.
//
// # Names and identifiers
//
// Each schema has a name (Names): train-upsert, train-delete and train (either) for
// cairn.train; query for cairn.queries; erasure for cairn.erasures; attribution,
// audit, deadletter, status and lineage for the output topics; and common, the
// definitions the others refer to (ids, finite numbers, hashes), which is no event.
// Its $id is URI(name), Base + name + Suffix, and is stable: a schema changes
// incompatibly only with the events' "v", which is in Suffix. Schemas refer to one
// another by relative references resolved against their $id, so a copy served at Base
// (Handler) is complete; lineage also refers to the OpenLineage 2-0-2 spec by its own
// $id at openlineage.io. The CloudEvents header ce_dataschema of an output record is
// its schema's URI (package stream).
//
// # What the schemas promise
//
// A message the daemon's decoder accepts (stream.DecodeTrain, stream.DecodeQuery) is
// valid under its schema once "x" is bound to the deployment's input size (the
// backbone's input length, stream.Limits.InputDim, which comes from the model:
// model.arch or model.file; a schema cannot know it: bind it with an overlay, as the
// tests do). The converse holds except for these messages, which only the schema
// accepts, because JSON Schema sees parsed values and not their text, or because the
// limit is the deployment's (the tests pin each class and fail on any other
// difference):
//
//   - a key given twice (the decoder: duplicate_field);
//   - "v" written as 1.0 or 1e0 (bad_version);
//   - an integer (label, k) written with a fraction or an exponent, 3.0 or 1e1
//     (bad_value);
//   - an id of at most 256 characters but more than 256 UTF-8 bytes (bad_id; JSON
//     Schema's maxLength counts characters);
//   - a delta strictly between 0 and 1 that float64 rounds to 0 or 1 (bad_value);
//   - a message longer than stream.Limits.MaxBytes (oversize).
//
// Limits are stream.Limits' defaults (ids of at most 256 bytes, k at most 1000); a
// deployment configured otherwise accepts other ranges. "Finite" is exact: a number is
// finite when its magnitude is below 2^1024 - 2^970, the least that rounds to
// infinity in float64, and the schemas state that bound as an exact integer.
//
// Output schemas forbid keys they do not list (additionalProperties false), so a
// field added to stream.Attribution, stream.Audit or stream.DeadLetter without its
// schema fails the tests; the open places are an answer's and an audit's "extra"
// object, a status event's "data" beyond the kinds the audit chain's trust rests on
// (audit_checkpoint, audit_key) and "version" of kind model, and the items of an
// erasure audit's "points" beyond "id".
//
// # Concurrency and memory
//
// Everything here is read-only and safe for concurrent use. Names and Get return
// copies the caller owns.
package schemas
