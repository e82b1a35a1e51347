package daemon

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/storage"
)

// PoolSchema is the schema number of the pool blob in storage.PoolState.Schema; the
// layout is in doc.go "Pool state". Another number is refused at restore. Schema 1
// also held the landmarks' features (2·m·q floats, 16 MiB per batch at the default
// m = 256, q = 4096); schema 2 recomputes them from the stored points at restore.
const PoolSchema = 2

// encodePool serializes the two-view pool for tx.PutPoolState. The layout is binary
// (doc.go "Pool state"): the blob is rewritten with every batch and holds a record per
// stored point, and JSON floats cost more than everything else in a batch of the small
// models (BenchmarkIngest). Equal pools give equal bytes.
func encodePool(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	fpb, err := hex.DecodeString(fp)
	if err != nil || len(fpb) != 32 {
		return storage.PoolState{}, fmt.Errorf("daemon: fingerprint %q is not 32 hex bytes", fp)
	}
	a, b := pr.A.State(), pr.B.State()
	w := make([]byte, 0, 32+stateSize(&a)+stateSize(&b))
	w = append(w, fpb...)
	w = appendState(w, &a)
	w = appendState(w, &b)
	return storage.PoolState{Schema: PoolSchema, Data: w}, nil
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

// appendState writes one coreset.State; the field order is the layout in doc.go.
func appendState(w []byte, s *coreset.State) []byte {
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
	w = appendU32(w, uint32(len(s.Points)))
	for _, p := range s.Points {
		w = appendStr(w, p.ID)
		w = appendF64(w, p.Diag)
		w = appendF64(w, p.Residual)
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

func (r *reader) state(view string) coreset.State {
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
	if n := r.count(4+16, view+".points"); n > 0 {
		s.Points = make([]coreset.PointState, n)
		for i := range s.Points {
			s.Points[i] = coreset.PointState{ID: r.str(view + ".point.id"), Diag: r.f64(view + ".point.diag"), Residual: r.f64(view + ".point.residual")}
		}
	} else {
		s.Points = []coreset.PointState{}
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

// parsePool parses a stored pool blob into the fingerprint and the two views' states,
// without their landmark features (which the blob does not hold).
func parsePool(ps storage.PoolState) (fp string, a, b coreset.State, err error) {
	if ps.Schema != PoolSchema {
		return "", a, b, fmt.Errorf("%w: schema %d, want %d", ErrPoolState, ps.Schema, PoolSchema)
	}
	r := &reader{b: ps.Data}
	fp = hex.EncodeToString(r.take(32, "features fingerprint"))
	a = r.state("a")
	b = r.state("b")
	if r.err != nil {
		return "", a, b, r.err
	}
	if len(r.b) != 0 {
		return "", a, b, fmt.Errorf("%w: %d trailing bytes after the pool state", ErrPoolState, len(r.b))
	}
	return fp, a, b, nil
}

// decodePool parses and restores a stored pool, filling each view's landmark features
// from src[view] (the point cache at restart: ψ is deterministic per point, so they are
// bit-identical to the features the pool held). It refuses another schema, a short or
// overlong blob, a pool of another feature pipeline (fp) or pool configuration (want),
// a landmark src does not know, two views holding different points, and anything
// coreset.Restore finds inconsistent. It never panics on any bytes.
func decodePool(ps storage.PoolState, fp string, want coreset.Config, src [2]coreset.FeatureSource) (*coreset.Pair, error) {
	got, a, b, err := parsePool(ps)
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
