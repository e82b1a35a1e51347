// Package storage is cairn's source of truth: one bbolt file holding the
// stored points, the landmark pool state (a blob and one record per point), immutable model versions, repeated-fit
// statistics, consumed Kafka offsets, an outbox of output events, a
// hash-chained audit log and the pending deletion audits (decided, not yet
// emitted). The byte layout is specified in FORMAT.md.
//
// storage knows nothing of the mathematics: it stores float64 vectors, byte
// blobs and plain records, and never interprets them.
//
// # Transactions
//
// Store.Apply runs a function in one bbolt read-write transaction. Everything a
// batch of input events changes (points, pool state, models, offsets, outbox
// entries, audit records, pending deletion audits) goes through the *Tx it is given, so it is committed
// all together or not at all: offsets never advance without the state they
// describe, and the reverse. If the function returns an error, nothing is kept.
// Store.View runs a read-only transaction (*ReadTx); read-only transactions run
// concurrently with each other and with one writer.
//
// # Memory ownership
//
// bbolt values are only valid inside a transaction; every value returned by
// this package is decoded into fresh memory owned by the caller and stays valid
// after the transaction. Arguments are encoded when a method is called and are
// never modified, so the caller may reuse its slices at once.
//
// # Outbox
//
// Tx.Enqueue assigns outbox seqs 1, 2, 3… in apply order; they are never reused.
// A publisher loops: wait on Store.OutboxReady, Store.Pending(limit), send with
// acknowledgements, Store.Ack(seqs...). An entry is deleted only by Ack, so
// after a crash it is sent again with the same topic, key and value, and the same
// OutboxEntry.Time: the time its transaction began (Tx.Time), stored with it.
//
// # Deletion and erasure
//
// bbolt is copy-on-write and leaves old page contents in free pages, so a value
// deleted with its key stays readable in the file. Points' raw inputs therefore live
// in slots outside it (slots.go, FORMAT.md "Slots": one segment file per transaction,
// each slot block-aligned in it): a transaction that deletes or replaces a point
// records its slot's range and sets a hold (from its first outbox entry on, Pending
// returns nothing), and once it commits, Apply punches the range out of its segment,
// syncs it (unlinking a segment left empty) and releases the hold. No audit can precede the erasure it
// attests, and a deletion writes O(input + a few pages) bytes whatever the size of the
// store, with no full-file rewrite and no free space beyond that. After a crash (or a
// failed erasure) Open and ScrubPending finish the erasure. Store.Compact still
// rewrites the file with only live data (Open runs it once after migrating a format 3
// file, whose values held the inputs).
//
// # Pool state
//
// Tx.PutPoolState stores the pool's blob (rewritten by every batch that changes
// the pool); Tx.PutPoolPoint stores one small opaque record per stored point
// (poolpoints bucket), read back with ReadTx.PoolPoint and ForEachPoolPoint. A
// record belongs to its point: PutPoolPoint refuses an id that is not stored,
// and DeletePoint removes the record with the point. Keeping the records apart
// from the blob lets a writer persist a batch in work independent of the number
// of points, and apart from the point values lets it rewrite all records
// without rewriting the raw inputs.
//
// # Versions and the deleted bucket
//
// Point.Version is the owner's version of a point's value (the daemon's: the offset of
// the upsert it came from), stored with the point; -1 means none (every point written
// before format 5). Tx.PutDeleted, DropDeleted and ReadTx.ForEachDeleted keep one more
// version per id, apart from the points: the daemon's record of a deletion whose
// tombstone it has not read back yet. Tx.Ack retires outbox entries inside a
// transaction, so that what their publication taught the owner commits with it.
//
// # Pending deletion audits
//
// A deletion's audit is emitted later than the deletion (after the refit it
// waits for), so between the deletion's commit and the audit's emission it must
// survive a crash. Tx.PutPending(seq, body) stores it in the same transaction as
// Tx.DeletePoint; later the daemon emits it (AppendAudit, Enqueue) and
// removes it with Tx.DeletePending in one transaction; after a restart
// ReadTx.ForEachPending lists what is still to emit, in seq order. seq (> 0) is
// the caller's own deletion sequence, unrelated to outbox and audit seqs;
// PutPending overwrites. body is opaque to storage, at most MaxPendingLen
// bytes, and must not contain raw input data: a deleted body's bytes remain on
// bbolt's freed pages (only inputs live in slots). Naming: Store.Pending(limit) is the
// outbox (entries awaiting publication), ReadTx.Pending(seq) this bucket.
//
// # Audit log
//
// Tx.AppendAudit(body) stores body verbatim under the next seq (from 1) with
// PrevHash (32 zero bytes for seq 1) and Hash = SHA-256(PrevHash || body), and
// returns the link so the caller can put seq, prev_hash and hash into the event
// it enqueues in the same transaction. "Canonical" means: body is exactly the
// bytes hashed; making them canonical (stable field order, no insignificant
// whitespace) is the caller's job, and a verifier hashes the body bytes it
// received. Store.VerifyAudit reports the first record that breaks the chain.
//
// # Durability and errors
//
// Options.NoSync defaults to false: every commit is fsynced. Every stored value
// carries a version byte and a CRC-32C over key and value; a mismatch is a
// *CorruptError (errors.Is(err, ErrCorrupt)). Open migrates a file of version 1 to 6
// to FormatVersion (8) in one transaction, silently (FORMAT.md, "Migrations");
// a file of any other version, or one missing a bucket of its version, fails
// Open with *FormatError (errors.Is(err, ErrUnknownFormat)) and is left
// unchanged.
//
// # Damaged files
//
// bbolt trusts its file: it maps it and panics on a page it cannot read, and a
// truncated file raises SIGBUS when a page past its end is touched. This package never
// lets either reach the caller: Open refuses a file shorter than its meta page says,
// and every bbolt call runs with debug.SetPanicOnFault and a recover that turn bbolt's
// panics and memory faults into a *DamageError (errors.Is(err, ErrDamaged)) naming the
// file and the damage; a panic of the caller's own code inside View or Apply still
// panics. A page damaged in a way that still reads (a redirected child pointer) is found
// only by a full check: Store.Check and CheckFile run bbolt's consistency check and
// decode every record, and Options.Check refuses, at open and before anything is
// written, a file with problems. testdata/damaged holds a corpus of damaged files with
// the outcome each must give.
//
// # Concurrency
//
// A *Store is safe for concurrent use. Compact and Close wait for running
// transactions and exclude new ones while they run. A *Tx or *ReadTx belongs to
// the goroutine running the function it was given to and is invalid after that
// function returns. The functions given to Apply and View must not call methods
// of the Store itself (a nested transaction can deadlock against Compact and
// against bbolt's remap).
package storage
