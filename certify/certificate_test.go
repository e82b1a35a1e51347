package certify

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/base/rng"
)

func mustAlloc(t testing.TB, delta float64, m, q int) Allocation {
	t.Helper()
	a, err := UniformAllocation(delta, m, q)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestUniformAllocation(t *testing.T) {
	a := mustAlloc(t, 0.05, 10, 5)
	if got, want := a.PerLandmark, 0.001; math.Abs(got-want) > 1e-18 {
		t.Errorf("PerLandmark = %v, want %v", got, want)
	}
	if got, want := a.PerQuery, 0.01; math.Abs(got-want) > 1e-18 {
		t.Errorf("PerQuery = %v, want %v", got, want)
	}
	for _, bad := range []struct {
		delta float64
		m, q  int
		want  error
	}{{0, 4, 1, ErrDelta}, {1, 4, 1, ErrDelta}, {math.NaN(), 4, 1, ErrDelta}, {0.1, 1, 1, ErrTopK}, {0.1, 4, 0, ErrValue}} {
		if _, err := UniformAllocation(bad.delta, bad.m, bad.q); !errors.Is(err, bad.want) {
			t.Errorf("UniformAllocation(%v, %d, %d) error = %v, want %v", bad.delta, bad.m, bad.q, err, bad.want)
		}
	}
}

func TestCertifyHandCases(t *testing.T) {
	alloc := mustAlloc(t, 0.8, 4, 1) // δ_ℓ = 0.2
	tests := []struct {
		name             string
		kernel, omega, v []float64
		k                int
		wantTop          []int
		wantSep          float64
		wantVerdict      Verdict
	}{
		{
			// ε = sqrt(V/0.2): 0.2236, 0.2236, 0.4472, 0. lower = min(4, 3−0.4472) = 2.5528,
			// upper = max(1, 2)+0.2236 = 2.2236.
			name: "separated", kernel: []float64{1, 2, 3, 4}, omega: []float64{1, 1, 1, 1},
			v: []float64{0.01, 0.01, 0.04, 0}, k: 2, wantTop: []int{3, 2},
			wantSep: 3 - math.Sqrt(0.2) - 2 - math.Sqrt(0.05), wantVerdict: Certified,
		},
		{
			// Tied at the cut: whatever the radii, min(Î−ε) ≤ Î_K = Î_{K+1} ≤ max(Î+ε).
			name: "tied, zero variance", kernel: []float64{1, 2, 2, 4}, omega: []float64{1, 1, 1, 1},
			v: []float64{0, 0, 0, 0}, k: 2, wantTop: []int{3, 1}, wantSep: 0, wantVerdict: Uncertified,
		},
		{
			name: "tied, with variance", kernel: []float64{1, 2, 2, 4}, omega: []float64{1, 1, 1, 1},
			v: []float64{0.01, 0.01, 0.01, 0.01}, k: 2, wantTop: []int{3, 1}, wantSep: -2 * math.Sqrt(0.05), wantVerdict: Uncertified,
		},
		{
			// Zero variance certifies exactly: the radii vanish and any gap separates.
			name: "zero variance", kernel: []float64{1, 2, 2 + 1e-9, 4}, omega: []float64{1, 1, 1, 1},
			v: []float64{0, 0, 0, 0}, k: 2, wantTop: []int{3, 2}, wantSep: 1e-9, wantVerdict: Certified,
		},
		{
			// ω scales scores and radii: Î = [2, 1, 0.5, 0], ε = ω·sqrt(0.2/0.2) = ω;
			// lower = 2−2 = 0, upper = max(1+1, 0.5+0.5, 0) = 2.
			name: "weights", kernel: []float64{1, 1, 1, 1}, omega: []float64{2, 1, 0.5, 0},
			v: []float64{0.2, 0.2, 0.2, 0.2}, k: 1, wantTop: []int{0}, wantSep: -2, wantVerdict: Uncertified,
		},
	}
	var r Ranker
	for _, tc := range tests {
		var c Certificate
		if err := r.CertifyTo(&c, tc.kernel, tc.omega, tc.v, tc.k, alloc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.TopKSet(); !equalInts(got, tc.wantTop) {
			t.Errorf("%s: top-K = %v, want %v", tc.name, got, tc.wantTop)
		}
		if math.Abs(c.Separation-tc.wantSep) > 1e-12 {
			t.Errorf("%s: separation = %v, want %v", tc.name, c.Separation, tc.wantSep)
		}
		if c.Verdict != tc.wantVerdict {
			t.Errorf("%s: verdict = %s, want %s", tc.name, c.Verdict, tc.wantVerdict)
		}
	}
}

func TestCertifyErrors(t *testing.T) {
	alloc := mustAlloc(t, 0.1, 3, 1)
	ok := []float64{1, 2, 3}
	var r Ranker
	var c Certificate
	tests := []struct {
		name             string
		kernel, omega, v []float64
		k                int
		alloc            Allocation
		want             error
	}{
		{"K=0", ok, ok, ok, 0, alloc, ErrTopK},
		{"K=m", ok, ok, ok, 3, alloc, ErrTopK},
		{"NaN kernel", []float64{1, math.NaN(), 3}, ok, ok, 1, alloc, ErrValue},
		{"negative omega", ok, []float64{1, -1, 3}, ok, 1, alloc, ErrValue},
		{"negative bound", ok, ok, []float64{1, 2, -3}, 1, alloc, ErrValue},
		{"Inf bound", ok, ok, []float64{1, math.Inf(1), 3}, 1, alloc, ErrValue},
		{"zero δ_ℓ", ok, ok, ok, 1, Allocation{}, ErrDelta},
	}
	for _, tc := range tests {
		if err := r.CertifyTo(&c, tc.kernel, tc.omega, tc.v, tc.k, tc.alloc); !errors.Is(err, tc.want) {
			t.Errorf("%s: error = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTopKAgainstSort checks the insertion top-K against a stable sort (score descending,
// ties by index), with many ties.
func TestTopKAgainstSort(t *testing.T) {
	r := rng.New(1, "certify/test/topk")
	for n := 0; n < 200; n++ {
		m := 1 + r.IntN(40)
		scores := make([]float64, m)
		for i := range scores {
			scores[i] = float64(r.IntN(6)) // heavy ties
		}
		k := 1 + r.IntN(m)
		got := make([]int, k)
		TopKTo(got, scores)
		want := make([]int, m)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(a, b int) bool { return scores[want[a]] > scores[want[b]] })
		if !equalInts(got, want[:k]) {
			t.Fatalf("scores %v k=%d: got %v, want %v", scores, k, got, want[:k])
		}
	}
}

// refFeatures returns ψ(x) of eq. composed for Jacobian j (d×p) under heads (h×d) and the
// reference SRHT sk, by plain loops.
func refFeatures(j []float64, d, p int, heads []float64, h int, sk *refSRHT) []float64 {
	var out []float64
	g := make([]float64, p)
	for hh := 0; hh < h; hh++ {
		for c := 0; c < p; c++ {
			g[c] = 0
			for i := 0; i < d; i++ {
				g[c] += j[i*p+c] * heads[hh*d+i]
			}
		}
		for _, v := range sk.apply(g) {
			out = append(out, v/math.Sqrt(float64(h)))
		}
	}
	return out
}

// TestCertificateSoundness counts incorrect issued certificates over independent evaluation
// draws (one shared sketch per query, as in the daemon) with exact V̄ from Prop. two-axis.
// Thm. topk bounds Pr[issued ∧ wrong] ≤ δ; the test checks the observed count against
// δ·queries plus 3 binomial standard deviations, and that a meaningful fraction certifies
// (otherwise the check would be vacuous).
func TestCertificateSoundness(t *testing.T) {
	const (
		d, p, pad = 12, 32, 32
		m, k      = 6, 2
		h, s      = 64, 24
		queries   = 150
		delta     = 0.3
	)
	r := rng.New(1, "certify/test/soundness")
	query := make([]float64, d*p)
	for i := range query {
		query[i] = r.NormFloat64()
	}
	qj := NewJacobian(query, d, p)
	var ws Workspace
	jacs := make([]*Jacobian, m)
	kstar := make([]float64, m)
	vbar := make([]float64, m)
	omega := make([]float64, m)
	for l := range jacs {
		j := make([]float64, d*p)
		for i := range j {
			j[i] = query[i] + 0.6*r.NormFloat64()
		}
		jacs[l] = NewJacobian(j, d, p)
		terms := ComputePairTerms(jacs[l], qj, pad, &ws)
		kstar[l] = terms.Mean()
		vbar[l] = terms.Variance(h, s).Total
		omega[l] = math.Pow(0.5, float64(l)) * (1 + 0.2*r.Float64())
	}
	exact := make([]float64, m)
	ScoresTo(exact, kstar, omega)
	wantTop := make([]int, k)
	TopKTo(wantTop, exact)
	alloc := mustAlloc(t, delta, m, 1)

	var rk Ranker
	var c Certificate
	row := make([]float64, m)
	issued, incorrect := 0, 0
	for q := 0; q < queries; q++ {
		dr := rng.New(1, rng.Sub("certify/test/soundness/eval", q))
		sk := newRefSRHT(dr, pad, s)
		heads := make([]float64, h*d)
		for i := range heads {
			heads[i] = dr.NormFloat64() / math.Sqrt(d)
		}
		pq := refFeatures(query, d, p, heads, h, sk)
		for l := range row {
			row[l] = dot(refFeatures(jacs[l].J, d, p, heads, h, sk), pq)
		}
		if err := rk.CertifyTo(&c, row, omega, vbar, k, alloc); err != nil {
			t.Fatal(err)
		}
		if c.Verdict == Certified {
			issued++
			if !sameSet(c.TopKSet(), wantTop) {
				incorrect++
			}
		}
	}
	if issued < queries/10 {
		t.Fatalf("only %d of %d queries certified: the soundness check would be vacuous", issued, queries)
	}
	if limit := delta*queries + 3*math.Sqrt(delta*(1-delta)*queries); float64(incorrect) > limit {
		t.Errorf("incorrect certificates = %d of %d issued (%d queries), want ≤ %.1f", incorrect, issued, queries, limit)
	}
	t.Logf("issued %d/%d, incorrect %d", issued, queries, incorrect)
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[int]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

func TestCertifyAllocatesNothing(t *testing.T) {
	r := rng.New(1, "certify/test/allocs")
	kernel, omega, v := randRow(r, 512)
	alloc := mustAlloc(t, 0.05, 512, 1)
	var rk Ranker
	var c Certificate
	_ = rk.CertifyTo(&c, kernel, omega, v, 10, alloc)
	if n := testing.AllocsPerRun(20, func() { _ = rk.CertifyTo(&c, kernel, omega, v, 10, alloc) }); n != 0 {
		t.Errorf("CertifyTo allocates %v times per call, want 0", n)
	}
}

func randRow(r *rand.Rand, m int) (kernel, omega, v []float64) {
	kernel, omega, v = make([]float64, m), make([]float64, m), make([]float64, m)
	for l := range kernel {
		kernel[l] = 1 + 0.3*r.NormFloat64()
		omega[l] = math.Exp(2 * r.NormFloat64())
		v[l] = 1e-6 * r.Float64()
	}
	return kernel, omega, v
}

// BenchmarkCertify times one certified top-10 over m = 512 landmarks from a kernel row and
// ω, split into its parts, and reports the full call against copying the three input rows
// (the memory traffic any certificate must pay), measured in the same run.
func BenchmarkCertify(b *testing.B) {
	r := rng.New(1, "certify/bench/certify")
	const m, k = 512, 10
	kernel, omega, v := randRow(r, m)
	alloc := mustAlloc(b, 0.05, m, 1)
	var rk Ranker
	var c Certificate
	scores := make([]float64, m)
	top := make([]int, k)
	buf := make([]float64, 3*m)
	// copyNs times copying the three input rows n times, in the same process and moment.
	copyNs := func(n int) float64 {
		start := time.Now()
		for i := 0; i < n; i++ {
			copy(buf[:m], kernel)
			copy(buf[m:2*m], omega)
			copy(buf[2*m:], v)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = rk.CertifyTo(&c, kernel, omega, v, k, alloc)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/copyNs(b.N), "x_copy3rows")
	})
	b.Run("scores", func(b *testing.B) {
		for b.Loop() {
			ScoresTo(scores, kernel, omega)
		}
	})
	b.Run("topk", func(b *testing.B) {
		ScoresTo(scores, kernel, omega)
		for b.Loop() {
			TopKTo(top, scores)
		}
	})
	b.Run("conservative-row", func(b *testing.B) {
		for b.Loop() {
			ConservativeRowTo(scores, kernel, 1, 16, 512, 4096)
		}
	})
}
