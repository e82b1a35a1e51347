package storage

import "time"

// Point is one stored training point. Storage does not interpret the numbers.
type Point struct {
	// ID is the point id: non-empty, at most MaxIDLen bytes.
	ID string
	// X is the raw input vector.
	X []float64
	// HasLabel says whether Label is meaningful.
	HasLabel bool
	Label    int64
	// Cert is per-point certificate data owned by the daemon (for example the
	// point's residual against the served pool); may be empty.
	Cert []float64
	// Version is the owner's version of the value, a non-negative integer (the daemon's
	// is the offset of the upsert it came from on the point's partition), or -1 for
	// none: a point stored before format 5 reads back with -1, and PutPoint stores no
	// version for a negative one.
	Version int64
	// Partition is the partition of the training topic the value came from (where its
	// record is, so that a tombstone can follow it there), or -1 for unknown: a point
	// stored before format 8 reads back with -1, and PutPoint stores none for a
	// negative one.
	Partition int32
}

// Matrix is a dense row-major matrix: element (i, j) is Data[i*Cols+j].
type Matrix struct {
	Rows, Cols int
	Data       []float64
}

// Model is one immutable model version.
type Model struct {
	// Version is the model version number, > 0.
	Version uint64
	// Landmarks are the point ids of the rows of A and A0, in row order.
	Landmarks []string
	// A is Ã, A0 is Ã_0 (the initializer), B is b (1 × k).
	A, A0, B Matrix
	// Meta is opaque fit metadata written by the daemon (for example JSON).
	Meta []byte
}

// FitStats are the repeated-fit statistics attached to one model version.
type FitStats struct {
	// Version is the model version the statistics belong to.
	Version uint64
	// Seeds are the derived seeds of the refits, one per run.
	Seeds []uint64
	// Mean and Var are per-landmark statistics (ω̄_ℓ and τ_ℓ² for the daemon).
	Mean, Var []float64
	// Meta is opaque metadata written by the daemon.
	Meta []byte
}

// PoolState is the landmark pool state: an opaque blob with the schema version of
// its writer. Storage never looks inside Data.
type PoolState struct {
	Schema uint32
	Data   []byte
}

// Offset is the last consumed offset of one topic partition.
type Offset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// OutboxEntry is one output event waiting to be published.
type OutboxEntry struct {
	// Seq is assigned by Tx.Enqueue, from 1, strictly increasing in apply order
	// and never reused (not even after Ack or Compact).
	Seq   uint64
	Topic string
	Key   []byte
	Value []byte
	// Time is when the transaction that enqueued the entry began (Tx.Time), in UTC
	// with nanoseconds: stored with the entry (since format 7), so every publication of
	// it can state the same time. Zero for entries written before format 7.
	Time time.Time
}

// AuditLink is the position of one audit record in the hash chain:
// Hash = SHA-256(PrevHash || body), PrevHash of Seq 1 is 32 zero bytes.
type AuditLink struct {
	Seq      uint64
	PrevHash [32]byte
	Hash     [32]byte
}

// AuditRecord is one stored audit record.
type AuditRecord struct {
	AuditLink
	// Body is the canonical event bytes given to Tx.AppendAudit.
	Body []byte
}
