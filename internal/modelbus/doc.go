// Package modelbus is the models topic (cairn.models; docs/architecture.md): how the
// primary publishes each immutable model version and every change of its deletion mask,
// and how a replica reads them back. It knows messages and bytes, not Kafka or bbolt.
//
// # Messages
//
// Every value starts with the magic "CRNM", a format byte (1) and a kind byte. Keys:
//
//	c/<sha256 hex>    a content piece (kind 4): bytes of some version's encoding, named
//	                  by their SHA-256 (ContentChunks cuts at content-defined places, so
//	                  two versions that share a run of bytes share its pieces)
//	v/<version>       the version's index (kind 5), written after its pieces: length and
//	                  SHA-256 of the whole encoding and its pieces' hashes in order
//	mask/<version>    the deletion mask (kind 3): version and every id masked so far in
//	                  the models with that version or older
//	p/<id>            a point (kind 6, points.go): a labelled stored point whose
//	                  gradient row the primary serves, its value version in the version
//	                  field, then its label and raw input
//	p-classes         the class count of the primary's gradient rows (kind 7), in the
//	                  version field
//
// Written by earlier leaders, still read: v/<version>/<i>, chunk i of the encoding
// (kind 1: version, i, count, the SHA-256 of the whole encoding, the bytes), and under
// v/<version> the manifest of such chunks (kind 2: version, count, length, SHA-256).
//
// A null value is a tombstone: after each version the primary writes them for every
// key the version does not name (the masks of that version and newer excepted), so that
// compaction keeps one version, its pieces, its masks and nothing of the deleted points'
// landmark rows. A piece that the next version names again is not written again: a
// refit on an unchanged pool writes its fit (Ã, ω, …), not the landmarks' inputs.
//
// # Points
//
// The point records are outside the versions' life cycle: the primary diffs them
// against the rows it serves (a record per new point or value version, a tombstone per
// point gone) and writes them before any version, so that a version fitted after a
// deletion comes after the deleted point's tombstone. A replica builds the primary's
// gradient rows from them (internal/role/replica Points); the Assembler ignores them.
//
// A version's encoding (Version.Encode) holds everything an answer needs: the landmark
// ids, views and augmented inputs (masked landmarks' rows zero: a deleted point's data
// never goes on the topic), Ã, b, the kernel scale, ω, ω̄, τ², the pool certificate at
// the fit, the mask, and the fingerprint of the feature pipeline it was fitted under
// (a replica configured with another backbone refuses it).
//
// # The deletion fence
//
// A mask applies to every model whose version is at most the mask's version: the
// primary writes mask/V when its serving model V drops a deleted landmark, so every
// model a replica may hold that is not newer than V was fitted before the deletion;
// a newer version carries its own mask inside its encoding.
//
// The primary writes a deletion's mask into its outbox in the very transaction that
// applies the deletion, and its publisher writes, in each round, the models topic's
// entries and waits for the broker's acknowledgement (all in-sync replicas) before it
// writes any other entry of the round (stream.PublisherConfig.First). The audit of a
// deletion is committed after the deletion, so it is published after the mask is
// acknowledged.
//
// A replica, before it answers a batch of queries, asks the broker for the end offset
// of the models topic and answers only once it has applied every message below it
// (modeltopic.Follower.Fence, which internal/role/replica calls). So: every answer
// whose batch a replica began after a deletion's audit was acknowledged is computed
// on a model with that deletion's mask, and cannot name the deleted id. An answer
// begun before the audit may name it, as an answer of the primary committed before the
// deletion may.
//
// # Contracts
//
// Decoders take outside bytes: they check lengths, counts, shapes, finiteness and
// checksums before allocating or building anything, and never panic (fuzzed). An
// Assembler is not safe for concurrent use; it bounds what it holds in memory
// (MaxPending bytes of incomplete versions).
package modelbus
