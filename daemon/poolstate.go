package daemon

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/storage"
)

// PoolSchema is the schema number of the pool blob in storage.PoolState.Schema and of
// the per-point records beside it; the layout is in doc.go "Pool state". Schema 1 also
// held the landmarks' features (2·m·q floats, 16 MiB per batch at the default m = 256,
// q = 4096) and is refused; schema 2 held one record per stored point inside the blob
// (O(n) bytes per batch) and is still read, and converted to schema 3 at restore
// (NewIngest); schema 3 keeps those records in the store's poolpoints bucket, one per
// point, written only when they change.
const PoolSchema = 3

// poolSchema2 is the previous schema, read (not written) so older stores still open.
const poolSchema2 = 2

// recordLen is the size of one per-point record: Diag and Residual of view A, then of
// view B, as float64 bits, little-endian.
const recordLen = 32

// encodePool serializes the two-view pool's core (coreset.Pool.CoreState of both views,
// without the per-point records) for tx.PutPoolState: O(m²) work and bytes
// whatever the number of stored points. The layout is binary (doc.go "Pool state")
// because the blob is rewritten with every batch. Equal pools give equal bytes. The
// per-point records are written separately (putRecord, putAllRecords).
func encodePool(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	fpb, err := hex.DecodeString(fp)
	if err != nil || len(fpb) != 32 {
		return storage.PoolState{}, fmt.Errorf("daemon: fingerprint %q is not 32 hex bytes", fp)
	}
	a, b := pr.A.CoreState(), pr.B.CoreState()
	w := make([]byte, 0, 32+stateSize(&a)+stateSize(&b))
	w = append(w, fpb...)
	w = appendState(w, &a, false)
	w = appendState(w, &b, false)
	return storage.PoolState{Schema: PoolSchema, Data: w}, nil
}

// appendRecord appends the record of a point whose view-A and view-B states are a and b.
func appendRecord(w []byte, a, b coreset.PointState) []byte {
	w = appendF64(w, a.Diag)
	w = appendF64(w, a.Residual)
	w = appendF64(w, b.Diag)
	return appendF64(w, b.Residual)
}

// decodeRecord parses the record stored for point id. It checks only the length; the
// values are checked by coreset.Restore (finite, non-negative).
func decodeRecord(id string, rec []byte) (a, b coreset.PointState, err error) {
	if len(rec) != recordLen {
		return a, b, fmt.Errorf("%w: pool record of point %q is %d bytes, want %d", ErrPoolState, id, len(rec), recordLen)
	}
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(rec[8*i:])) }
	return coreset.PointState{ID: id, Diag: f(0), Residual: f(1)}, coreset.PointState{ID: id, Diag: f(2), Residual: f(3)}, nil
}

// putRecord writes the current record of point id, if the pool holds it (an upsert
// deleted later in the same batch has none: its DeletePoint removes the point and any
// record). Insert changes only the inserted point's record and Delete only drops the
// deleted one's (coreset.Pool.Generation), so an applied batch writes one record per
// upsert and none per delete.
func putRecord(tx *storage.Tx, pr *coreset.Pair, buf []byte, id string) ([]byte, error) {
	a, okA := pr.A.PointState(id)
	b, okB := pr.B.PointState(id)
	if okA != okB {
		return buf, fmt.Errorf("daemon: point %q is in one view's pool only (a %v, b %v)", id, okA, okB)
	}
	if !okA {
		return buf, nil
	}
	buf = appendRecord(buf[:0], a, b)
	return buf, tx.PutPoolPoint(id, buf)
}

// putAllRecords rewrites the record of every stored point ids (sorted, so bbolt appends
// in key order): after an Adopt every residual changed. This is the O(n) part of a sync.
func putAllRecords(tx *storage.Tx, pr *coreset.Pair, ids []string) error {
	if len(ids) != pr.A.Len() {
		return fmt.Errorf("daemon: %d ids for a pool of %d points", len(ids), pr.A.Len())
	}
	var buf []byte
	for _, id := range ids {
		if !pr.A.Has(id) {
			return fmt.Errorf("daemon: stored point %q is not in the pool", id)
		}
		var err error
		if buf, err = putRecord(tx, pr, buf, id); err != nil {
			return err
		}
	}
	return nil
}

// stateSize is an upper bound of appendState's output, to allocate once.
func stateSize(s *coreset.State) int {
	n := 256 + 8*(len(s.PivotValues)+len(s.Factor)+len(s.Gram)+len(s.TopUpKeys))
	for _, p := range s.Points {
		n += 4 + len(p.ID) + 16
	}
	for _, id := range s.Landmarks {
		n += 4 + len(id)
	}
	return n
}

func appendU32(w []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(w, v) }
func appendI64(w []byte, v int) []byte    { return binary.LittleEndian.AppendUint64(w, uint64(int64(v))) }
func appendF64(w []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(w, math.Float64bits(v))
}
func appendBool(w []byte, v bool) []byte {
	if v {
		return append(w, 1)
	}
	return append(w, 0)
}
func appendStr(w []byte, s string) []byte { return append(appendU32(w, uint32(len(s))), s...) }
func appendF64s(w []byte, v []float64) []byte {
	w = appendU32(w, uint32(len(v)))
	for _, x := range v {
		w = appendF64(w, x)
	}
	return w
}

// appendState writes one coreset.State; the field order is the layout in doc.go. The
// point records are written only with points (schema 2, kept for tests and the
// before/after benchmark); schema 3 has no such field.
func appendState(w []byte, s *coreset.State, points bool) []byte {
	w = appendI64(w, s.Version)
	c := &s.Config
	w = appendI64(w, c.Dim)
	w = appendI64(w, c.Budget.M)
	w = appendF64(w, c.Budget.Lambda)
	w = appendF64(w, c.Tol)
	w = appendBool(w, c.TopUp)
	w = binary.LittleEndian.AppendUint64(w, c.Seed)
	w = appendI64(w, c.SLQ.Probes)
	w = appendI64(w, c.SLQ.Steps)
	w = appendI64(w, c.SLQ.Deflate)
	w = appendI64(w, c.SLQ.Power)
	if points {
		w = appendU32(w, uint32(len(s.Points)))
		for _, p := range s.Points {
			w = appendStr(w, p.ID)
			w = appendF64(w, p.Diag)
			w = appendF64(w, p.Residual)
		}
	}
	w = appendU32(w, uint32(len(s.Landmarks)))
	for _, id := range s.Landmarks {
		w = appendStr(w, id)
	}
	w = appendI64(w, s.Greedy)
	w = appendF64s(w, s.PivotValues)
	w = appendF64s(w, s.Factor)
	w = appendF64s(w, s.Gram)
	w = appendU32(w, uint32(len(s.TopUpKeys)))
	for _, k := range s.TopUpKeys {
		w = binary.LittleEndian.AppendUint64(w, k)
	}
	w = appendI64(w, s.M)
	w = appendF64(w, s.Threshold)
	w = appendF64(w, s.Cert)
	w = appendF64(w, s.CertComp)
	w = appendF64(w, s.TraceK)
	w = appendF64(w, s.TraceKComp)
	w = appendBool(w, s.Exact)
	w = appendBool(w, s.Stale)
	w = appendI64(w, s.StaleFrom)
	w = appendBool(w, s.Changed)
	return w
}

// reader decodes the blob; the first error sticks and later reads return zero values.
// Every count is checked against the bytes left before anything is allocated.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrPoolState}, args...)...)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s needs %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// int reads an i64 that must fit an int on this platform (always, on 64-bit).
func (r *reader) int(what string) int {
	v := int64(r.u64(what))
	if int64(int(v)) != v {
		r.fail("%s = %d overflows int", what, v)
		return 0
	}
	return int(v)
}

func (r *reader) f64(what string) float64 { return math.Float64frombits(r.u64(what)) }

func (r *reader) bool(what string) bool {
	b := r.take(1, what)
	if b == nil {
		return false
	}
	if b[0] > 1 {
		r.fail("%s = %d, want 0 or 1", what, b[0])
	}
	return b[0] == 1
}

// count reads a u32 count of items of at least size bytes each.
func (r *reader) count(size int, what string) int {
	n := int(r.u32(what))
	if r.err == nil && n > len(r.b)/size {
		r.fail("%s = %d items of ≥ %d bytes, %d bytes left", what, n, size, len(r.b))
		return 0
	}
	return n
}

func (r *reader) str(what string) string {
	n := r.count(1, what+" length")
	return string(r.take(n, what))
}

func (r *reader) f64s(what string) []float64 {
	n := r.count(8, what)
	if n == 0 || r.err != nil {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = r.f64(what)
	}
	return v
}

// state reads one coreset.State, with its point records when points (schema 2).
func (r *reader) state(view string, points bool) coreset.State {
	var s coreset.State
	s.Version = r.int(view + ".version")
	c := &s.Config
	c.Dim = r.int(view + ".config.dim")
	c.Budget.M = r.int(view + ".config.budget.m")
	c.Budget.Lambda = r.f64(view + ".config.budget.lambda")
	c.Tol = r.f64(view + ".config.tol")
	c.TopUp = r.bool(view + ".config.topup")
	c.Seed = r.u64(view + ".config.seed")
	c.SLQ.Probes = r.int(view + ".config.slq.probes")
	c.SLQ.Steps = r.int(view + ".config.slq.steps")
	c.SLQ.Deflate = r.int(view + ".config.slq.deflate")
	c.SLQ.Power = r.int(view + ".config.slq.power")
	if points { // schema 3 leaves them to poolStates, which reads the store's records
		s.Points = []coreset.PointState{}
		if n := r.count(4+16, view+".points"); n > 0 {
			s.Points = make([]coreset.PointState, n)
			for i := range s.Points {
				s.Points[i] = coreset.PointState{ID: r.str(view + ".point.id"), Diag: r.f64(view + ".point.diag"), Residual: r.f64(view + ".point.residual")}
			}
		}
	}
	if n := r.count(4, view+".landmarks"); n > 0 {
		s.Landmarks = make([]string, n)
		for i := range s.Landmarks {
			s.Landmarks[i] = r.str(view + ".landmark")
		}
	}
	s.Greedy = r.int(view + ".greedy")
	s.PivotValues = r.f64s(view + ".pivot_values")
	s.Factor = r.f64s(view + ".factor")
	s.Gram = r.f64s(view + ".gram")
	if n := r.count(8, view+".topup_keys"); n > 0 {
		s.TopUpKeys = make([]uint64, n)
		for i := range s.TopUpKeys {
			s.TopUpKeys[i] = r.u64(view + ".topup_key")
		}
	}
	s.M = r.int(view + ".m")
	s.Threshold = r.f64(view + ".threshold")
	s.Cert = r.f64(view + ".cert")
	s.CertComp = r.f64(view + ".cert_comp")
	s.TraceK = r.f64(view + ".trace_k")
	s.TraceKComp = r.f64(view + ".trace_k_comp")
	s.Exact = r.bool(view + ".exact")
	s.Stale = r.bool(view + ".stale")
	s.StaleFrom = r.int(view + ".stale_from")
	s.Changed = r.bool(view + ".changed")
	return s
}

// storedRecord is one per-point record as read from the store (ForEachPoolPoint).
type storedRecord struct {
	id  string
	rec []byte
}

// readPool reads the stored pool blob (ok false when there is none) and every
// per-point record, in id order.
func readPool(tx *storage.ReadTx) (ps storage.PoolState, ok bool, recs []storedRecord, err error) {
	if ps, ok, err = tx.PoolState(); err != nil {
		return ps, ok, nil, err
	}
	err = tx.ForEachPoolPoint(func(id string, rec []byte) error {
		recs = append(recs, storedRecord{id, rec})
		return nil
	})
	return ps, ok, recs, err
}

// parsePool parses a stored pool blob into the fingerprint and the two views' states,
// without their landmark features (which the blob does not hold). Schema 3 states have
// no Points (the records are stored beside the blob, see poolStates); schema 2 states
// carry them.
func parsePool(ps storage.PoolState) (fp string, a, b coreset.State, err error) {
	if ps.Schema != PoolSchema && ps.Schema != poolSchema2 {
		return "", a, b, fmt.Errorf("%w: schema %d, want %d (or %d, converted at restore)", ErrPoolState, ps.Schema, PoolSchema, poolSchema2)
	}
	points := ps.Schema == poolSchema2
	r := &reader{b: ps.Data}
	fp = hex.EncodeToString(r.take(32, "features fingerprint"))
	a = r.state("a", points)
	b = r.state("b", points)
	if r.err != nil {
		return "", a, b, r.err
	}
	if len(r.b) != 0 {
		return "", a, b, fmt.Errorf("%w: %d trailing bytes after the pool state", ErrPoolState, len(r.b))
	}
	return fp, a, b, nil
}

// poolStates parses the blob and fills both views' Points: from the records recs (id
// order) for schema 3, from the blob for schema 2, which must then come without
// records (a store holds one or the other).
func poolStates(ps storage.PoolState, recs []storedRecord) (fp string, a, b coreset.State, err error) {
	if fp, a, b, err = parsePool(ps); err != nil {
		return fp, a, b, err
	}
	if ps.Schema == poolSchema2 {
		if len(recs) != 0 {
			return fp, a, b, fmt.Errorf("%w: a schema %d pool (records inside the blob) with %d per-point records in the store", ErrPoolState, ps.Schema, len(recs))
		}
		return fp, a, b, nil
	}
	a.Points = make([]coreset.PointState, len(recs))
	b.Points = make([]coreset.PointState, len(recs))
	for i, r := range recs {
		if a.Points[i], b.Points[i], err = decodeRecord(r.id, r.rec); err != nil {
			return fp, a, b, err
		}
	}
	return fp, a, b, nil
}

// decodePool restores a stored pool from its blob and its per-point records (recs, id
// order; none for a schema 2 blob), filling each view's landmark features from src[view]
// (the point cache at restart: ψ is deterministic per point, so they are bit-identical
// to the features the pool held). It refuses another schema, a short or overlong blob or
// record, a pool of another feature pipeline (fp) or pool configuration (want), a
// landmark src does not know, two views holding different points, and anything
// coreset.Restore finds inconsistent. It never panics on any bytes.
func decodePool(ps storage.PoolState, recs []storedRecord, fp string, want coreset.Config, src [2]coreset.FeatureSource) (*coreset.Pair, error) {
	got, a, b, err := poolStates(ps, recs)
	if err != nil {
		return nil, err
	}
	if got != fp {
		return nil, fmt.Errorf("%w: features fingerprint %s, the configured model has %s (model, weights, sketch or seed changed; rebuild the pool)",
			ErrPoolState, got, fp)
	}
	pr := &coreset.Pair{}
	for _, v := range []struct {
		name string
		view int
		st   *coreset.State
		dst  **coreset.Pool
	}{{"a", 0, &a, &pr.A}, {"b", 1, &b, &pr.B}} {
		if v.st.Config != want {
			return nil, fmt.Errorf("%w: view %s pool config %+v, configured %+v", ErrPoolState, v.name, v.st.Config, want)
		}
		q := want.Dim
		v.st.LandmarkFeatures = make([]float64, len(v.st.Landmarks)*q)
		for i, id := range v.st.Landmarks {
			if err := src[v.view].FeaturesTo(v.st.LandmarkFeatures[i*q:(i+1)*q], id); err != nil {
				return nil, fmt.Errorf("%w: view %s landmark %q: %w", ErrPoolState, v.name, id, err)
			}
		}
		p, err := coreset.Restore(*v.st)
		if err != nil {
			return nil, fmt.Errorf("%w: view %s: %w", ErrPoolState, v.name, err)
		}
		*v.dst = p
	}
	if pr.A.Len() != pr.B.Len() {
		return nil, fmt.Errorf("%w: view a holds %d points, view b %d", ErrPoolState, pr.A.Len(), pr.B.Len())
	}
	for _, pt := range a.Points {
		if !pr.B.Has(pt.ID) {
			return nil, fmt.Errorf("%w: point %q is in view a but not in view b", ErrPoolState, pt.ID)
		}
	}
	return pr, nil
}
