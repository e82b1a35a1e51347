package serving

import (
	"math"
	"runtime"
	"sync"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/vec"
)

// ExactRows are the landmarks' exact eNTK rows, in model row order, masked ones included
// (their entries are computed and ignored), with the exact diagonals k*(x_ℓ, x_ℓ) from
// the float64 rows. They are derived from the stored landmark inputs when a model is
// installed, never stored, and come in one of two representations, both float32 and
// both exact up to a stated rounding bound:
//
//   - full rows φ(x_ℓ) (entk.ExactTo; ExactDim floats each, 101 MB for the default
//     convnet at M = 512), whenever M·ExactDim·4 bytes fit the budget: rows, radii
//     (entk.ExactRowError) and answers exactly as before factored rows existed;
//   - otherwise, for a dense backbone (mlp, resmlp), factored rows (entk.Factored: per
//     Linear its input and its d output gradients; 16.7 MB for resmlp:108-128x3-8 at
//     M = 512, where full rows would take 1.85 GB), radii entk.Factored.RowError.
//
// Everything that reads them goes through the methods below (a query's row, the kernel
// row of one query or of a batch, an entry's radius, the Gram matrix), so answers,
// AnswerBatch, the residual fraction and ReseedJaccard work with either.
//
// Either representation is held in memory (NewExactRows) or, past the memory budget,
// in a read-only mapping of a rows file (Disk, diskrows.go): the same float32 values
// read by the same code, so answers are bit for bit the same; Where says which.
type ExactRows struct {
	lf   []float32 // in memory, or the mapped rows of a rows file (disk)
	diag []float64
	dim  int
	fac  *entk.Factored // nil: full rows
	disk bool           // lf is mapped: unmapped when the ExactRows is unreachable
	// unmap is that cleanup on a disk ExactRows, and release unmaps at once (transient
	// rows nobody else holds: drop); both nil in memory.
	unmap   runtime.Cleanup
	release func()
	// g is the rows' Gram matrix for the residual fraction (explained.go), made once.
	gramOnce sync.Once
	g        []float64
}

// NewExactRows computes the exact rows of the m landmarks xs (m×D) on all cores: full
// rows when m·ExactDim·4 bytes fit budget, else factored rows when the backbone has them
// and m·Dim·4 bytes fit; otherwise (or when budget ≤ 0) it returns nil.
func NewExactRows(b entk.Backbone, xs []float64, m int, budget int64) *ExactRows {
	l, ok := layoutOf(b, m, budget)
	if !ok {
		return nil
	}
	r := l.alloc(m)
	r.computeTo(r.lf, r.diag, b, xs, m)
	return r
}

// rowsLayout is a representation of exact rows: full rows of dim floats (fac nil) or
// factored rows of fac.
type rowsLayout struct {
	dim int
	fac *entk.Factored
}

// layoutOf is NewExactRows's representation for m landmarks under budget; false when
// the rows fit neither.
func layoutOf(b entk.Backbone, m int, budget int64) (rowsLayout, bool) {
	if budget <= 0 {
		return rowsLayout{}, false
	}
	if e := entk.ExactDim(b); int64(m)*int64(e)*4 <= budget {
		return rowsLayout{dim: e}, true
	}
	f, ok := entk.NewFactored(b)
	if !ok || int64(m)*int64(f.Dim())*4 > budget {
		return rowsLayout{}, false
	}
	return rowsLayout{dim: f.Dim(), fac: f}, true
}

// alloc returns rows of m landmarks in l, not yet computed.
func (l rowsLayout) alloc(m int) *ExactRows {
	return &ExactRows{lf: make([]float32, m*l.dim), diag: make([]float64, m), dim: l.dim, fac: l.fac}
}

// holds reports whether o is held in memory in l.
func (l rowsLayout) holds(o *ExactRows) bool {
	return o != nil && !o.disk && o.lf != nil && o.dim == l.dim && (o.fac == nil) == (l.fac == nil)
}

// computeTo writes the rows of the n inputs xs in r's representation into lf (n·dim)
// and their diagonals into diag, on all cores; each row's bits depend on its input only.
func (r *ExactRows) computeTo(lf []float32, diag []float64, b entk.Backbone, xs []float64, n int) {
	if r.fac != nil {
		r.fac.Batch32To(lf, diag, xs, n)
		return
	}
	entk.ExactBatch32To(lf, diag, b, xs, n)
}

// drop releases transient rows at once: a disk mapping is unmapped (the caller holds
// the only reference and reads r no more); rows in memory are left to the collector.
func (r *ExactRows) drop() {
	if r != nil && r.release != nil {
		r.release()
		r.lf, r.release = nil, nil
	}
}

// Factored reports whether the rows are factored (entk.Factored) rather than full.
func (r *ExactRows) Factored() bool { return r.fac != nil }

// Where the rows are held: RowsInMemory or RowsOnDisk (the "exact_rows" of answers
// and /status).
const (
	RowsInMemory = "memory"
	RowsOnDisk   = "disk"
)

// Where says where the rows are held: RowsInMemory or RowsOnDisk.
func (r *ExactRows) Where() string {
	if r.disk {
		return RowsOnDisk
	}
	return RowsInMemory
}

// Variance says which variance model the answers of s use and, on the exact path, where
// its rows are held: (certify.VarianceExactKernel, RowsInMemory or RowsOnDisk), or
// (certify.VarianceConservative, "") on the sketched path.
func (s *Model) Variance() (model, rows string) {
	if s.Exact == nil {
		return certify.VarianceConservative, ""
	}
	return certify.VarianceExactKernel, s.Exact.Where()
}

// Bytes is the memory the rows take, or on disk the mapped file's rows (float32
// entries; the diagonals and the Gram matrix are M and M² float64s more, in memory).
func (r *ExactRows) Bytes() int64 { return int64(len(r.lf)) * 4 }

// ready sets w up to compute query rows for r on backbone b: the exact Query (full rows)
// or the FactoredQuery, made once per backbone, and w.phi of the rows' length.
func (r *ExactRows) ready(w *Workspace, b entk.Backbone) {
	if w.eb != b {
		w.eb, w.eq, w.fq = b, nil, nil
	}
	if r.fac == nil && w.eq == nil {
		w.eq = entk.NewExactQuery(b)
	}
	if r.fac != nil && w.fq == nil {
		w.fq = r.fac.NewQuery()
	}
	w.phi = grow(w.phi, r.dim)
}

// queryTo writes the query's row (φ, or its factored row) into dst (len r.dim) and
// returns k*(x, x); w must be ready for r.
func (r *ExactRows) queryTo(w *Workspace, dst, x []float64) float64 {
	if r.fac != nil {
		return w.fq.RowTo(dst, x)
	}
	return w.eq.ExactTo(dst, x)
}

// kernelRowTo writes the exact kernel row of the query row phi against every landmark
// into dst (len M).
func (r *ExactRows) kernelRowTo(w *Workspace, dst, phi []float64) {
	if r.fac != nil {
		w.fq.KernelRowTo(dst, r.lf, phi)
	} else {
		entk.ExactRowTo(dst, r.lf, phi)
	}
	runtime.KeepAlive(r) // mapped rows stay mapped while r.lf is read
}

// kernelRowsTo writes the kernel rows of the query rows phis against the m landmarks into
// dst (query-major), each bit for bit kernelRowTo's, reading the landmark rows once for
// the batch.
func (r *ExactRows) kernelRowsTo(w *Workspace, dst []float64, phis [][]float64, m int) {
	if r.fac != nil {
		w.fq.KernelRowsTo(dst, r.lf, phis, m)
	} else {
		w.lanes = vec.Dots32BatchTo(dst, phis, r.lf, r.dim, r.dim, m, w.lanes)
	}
	runtime.KeepAlive(r)
}

// rowError bounds the rounding error of a kernel row's entry for landmark l and a query
// of exact diagonal ktt.
func (r *ExactRows) rowError(l int, ktt float64) float64 {
	if r.fac != nil {
		return r.fac.RowError(r.diag[l], ktt)
	}
	return entk.ExactRowError(r.diag[l], ktt, r.dim)
}

// cosine is model row l's entry of the exact row full as a cosine, full[l]/√(ktt·kll),
// clamped to [−1, 1] (the float32 rows round); 0 when a diagonal is not positive.
func (e *ExactRows) cosine(full []float64, l int, ktt float64) float64 {
	d := ktt * e.diag[l]
	if !(d > 0) {
		return 0
	}
	return max(-1, min(1, full[l]/math.Sqrt(d)))
}
