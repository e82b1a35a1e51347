package rng

import (
	"math"
	"testing"
)

func TestSameNameSameStream(t *testing.T) {
	a, b := New(7, "entk/heads"), New(7, "entk/heads")
	for i := 0; i < 100; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: got %d and %d from identical streams", i, x, y)
		}
	}
}

// TestNamesIndependent checks that streams with different names (and different seeds) are
// uncorrelated: the sample correlation of 20000 uniform pairs has standard deviation
// 1/sqrt(20000) ≈ 0.0071, so |r| < 0.04 fails with probability < 1e-8 under independence.
func TestNamesIndependent(t *testing.T) {
	cases := []struct {
		s1, s2 uint64
		n1, n2 string
	}{
		{1, 1, "entk/heads", "entk/srht"},
		{1, 2, "entk/heads", "entk/heads"},
		{1, 1, "a", "a/0"},
	}
	for _, c := range cases {
		a, b := New(c.s1, c.n1), New(c.s2, c.n2)
		const n = 20000
		var sx, sy, sxx, syy, sxy float64
		for i := 0; i < n; i++ {
			x, y := a.Float64(), b.Float64()
			sx += x
			sy += y
			sxx += x * x
			syy += y * y
			sxy += x * y
		}
		cov := sxy/n - sx/n*sy/n
		r := cov / math.Sqrt((sxx/n-sx/n*sx/n)*(syy/n-sy/n*sy/n))
		if math.Abs(r) > 0.04 {
			t.Errorf("%d/%q vs %d/%q: correlation %.4f, want |r| < 0.04", c.s1, c.n1, c.s2, c.n2, r)
		}
	}
}

func TestSeedStable(t *testing.T) {
	// The derivation is part of the storage format: pin one value so a change is noticed.
	// The expected value is the first 8 bytes of SHA-256(00..01 || "x"), computed once with
	// sha256sum: printf '\x00\x00\x00\x00\x00\x00\x00\x01x' | sha256sum.
	if got, want := Seed(1, "x"), uint64(0x028f0df5b8596fbc); got != want {
		t.Fatalf("Seed(1, \"x\") = %#x, want %#x", got, want)
	}
	if Seed(1, "x") == Seed(2, "x") || Seed(1, "x") == Seed(1, "y") {
		t.Fatal("different seeds or names gave the same derived seed")
	}
	if Sub("fit/minibatch", 3) != "fit/minibatch/3" {
		t.Fatalf("Sub: got %q", Sub("fit/minibatch", 3))
	}
}
