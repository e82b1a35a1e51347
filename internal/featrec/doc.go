// Package featrec is the feature record of cairn.features: the fit-draw features ψ of
// both views of one training upsert, computed by a featurizer (internal/role/featurizer)
// for the primary, with the coordinates of the training event they were computed for
// and the fingerprint of the pipeline that computed them.
//
// # Format (version 1)
//
// All integers are big-endian. A record is exactly
//
//	offset  size      field
//	0       3         magic "cfr"
//	3       1         version, 1
//	4       32        pipeline fingerprint: the SHA-256 whose hex is pipeline.Features.Fingerprint
//	36      4         source partition (uint32, at most 2^31−1)
//	40      8         source offset (int64, ≥ 0)
//	48      2         T, the source topic's length in bytes (1 ≤ T ≤ MaxTopicBytes)
//	50      T         source topic (UTF-8)
//	50+T    2         I, the id's length in bytes (1 ≤ I ≤ MaxIDBytes)
//	52+T    I         id (UTF-8)
//	52+T+I  4         q, the feature dimension of one view (1 ≤ q ≤ MaxDim)
//	56+T+I  8q        ψ of view 0 then view 1, q float32 bit patterns each
//	56+T+I+8q 4       CRC-32C (Castagnoli) of every byte before it
//
// # Precision
//
// pipeline.Features returns fl32(ψ): every feature is a float32 held in a float64
// (pipeline.RoundTo32). The record stores the float32 bit patterns, so the features it
// carries widen back to exactly the float64 values the primary would compute, bit for
// bit. Encode refuses a value that is not a float32 (NaN excepted: a NaN's payload is
// not kept, and any NaN makes the point a dead letter whoever computes it).
//
// # Contracts
//
// Decode and Parse validate every field and the checksum before they return and never
// panic, whatever the bytes (FuzzDecode); they accept the same records. A Record shares
// no memory with the bytes it was decoded from; a View (Parse) aliases them, so it is
// valid only while they are unmodified, and Parse, View.FingerprintIs and
// View.FeaturesTo allocate nothing (the primary's per-event path). Encode does not
// modify its Record. All are safe for concurrent use.
package featrec
