package fit

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestEigenSymCores: eigenSym gives mat.EigenSym's eigenvalues and eigenvectors bit for
// bit at GOMAXPROCS 1, 2 and 3, on matrices that take each of Dsteqr's paths: random
// symmetric ones of sizes around the rotation blocks (32 rows) and one large enough for
// its recorded sweeps to be applied to blocks of rows side by side (300; every random
// one fills the record of sweeps, so it is applied before the end too), a centered Gram
// matrix
// as PCI decomposes, norms below and above Dsyev's scaling thresholds, a block-diagonal
// one that splits into unreduced blocks, a diagonal one (nothing to reduce), one with a
// repeated eigenvalue, and sizes 1 and 2.
func TestEigenSymCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rnd := rand.New(rand.NewPCG(3, 3))
	sym := func(n int, f func(i, j int) float64) *mat.SymDense {
		s := mat.NewSymDense(n, nil)
		for i := range n {
			for j := i; j < n; j++ {
				s.SetSym(i, j, f(i, j))
			}
		}
		return s
	}
	random := func(n int, scale float64) *mat.SymDense {
		return sym(n, func(int, int) float64 { return scale * rnd.NormFloat64() })
	}
	x := mat.NewDense(97, 20, nil)
	for i := range 97 {
		for j := range 20 {
			x.Set(i, j, rnd.Float64())
		}
	}
	var gram mat.Dense
	gram.Mul(x, x.T())
	cases := map[string]*mat.SymDense{
		"n1": random(1, 1), "n2": random(2, 1), "n31": random(31, 1), "n33": random(33, 1), "n130": random(130, 1),
		"n300":          random(300, 1), // sweeps of more than rotMinWork entries: rows in blocks side by side
		"centered gram": centered(&gram, true),
		"tiny":          random(40, 1e-170), "huge": random(40, 1e170),
		"blocks": sym(70, func(i, j int) float64 {
			if i/20 != j/20 {
				return 0
			}
			return rnd.NormFloat64()
		}),
		"diagonal": sym(50, func(i, j int) float64 {
			if i != j {
				return 0
			}
			return rnd.NormFloat64()
		}),
		"repeated": sym(60, func(i, j int) float64 {
			if i == j {
				return 1
			}
			return 1e-3 * float64((i+j)%3)
		}),
	}
	for name, s := range cases {
		var es mat.EigenSym
		if !es.Factorize(s, true) {
			t.Fatalf("%s: mat.EigenSym did not converge", name)
		}
		var wantZ mat.Dense
		es.VectorsTo(&wantZ)
		wantW := es.Values(nil)
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			w, z, ok := eigenSym(s)
			if !ok {
				t.Errorf("%s GOMAXPROCS %d: did not converge", name, procs)
				continue
			}
			if !slices.Equal(w, wantW) || !slices.Equal(z.RawMatrix().Data, wantZ.RawMatrix().Data) {
				t.Errorf("%s GOMAXPROCS %d: eigenpairs differ from mat.EigenSym's", name, procs)
			}
		}
	}
}
