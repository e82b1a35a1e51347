package entk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SRHT is the subsampled randomized Hadamard transform S = sqrt(P/s)·R·H·D of paper
// eq. composed, acting on vectors of length p (the backbone's parameter count) that are
// zero-padded to P = PaddedLen(p), the next power of two ≥ 2:
//
//   - D = diag(ε_1, …, ε_P), ε_k independent Rademacher signs;
//   - H the normalized Walsh–Hadamard matrix (FWHT);
//   - R the P×P identity restricted to s rows drawn uniformly without replacement,
//     stored in ascending order. The order of the rows is irrelevant to every inner
//     product <Su, Sv>; ascending order makes the gather walk memory forward.
//
// Then E[SᵀS] = I_P and Thm. srht-exact gives Var<Su,Sv> = (P−s)/((P−1)s)·Φ(vuᵀ); at s = P
// the sketch is an exact rotation.
//
// s = 0 means "no sketch": S is the identity on the unpadded vector, of output length p,
// and no randomness is drawn.
//
// An SRHT is immutable after construction and safe for concurrent use; each caller brings
// its own work buffer.
type SRHT struct {
	p, pad, s int
	signs     []float64 // ε_k ∈ {−1, +1}, len pad; nil when s == 0
	rows      []int     // ascending, len s; nil when s == 0
}

// PaddedLen returns the SRHT's padded length for an input of length p ≥ 1: the smallest
// power of two that is ≥ max(p, 2) (the paper requires P ≥ 2).
func PaddedLen(p int) int {
	n := 2
	for n < p {
		n <<= 1
	}
	return n
}

// NewSRHT draws an SRHT of width s for inputs of length p from r. The draw is, in this
// order: P signs, ε_k = +1 if r.Uint64() has its top bit clear and −1 otherwise; then s
// rows by a partial Fisher–Yates shuffle of 0..P−1 (for i < s: swap i with i + r.IntN(P−i)),
// whose first s entries are sorted ascending. So the same r state gives the same SRHT on
// every platform. s == 0 draws nothing. It returns an error wrapping ErrSketchSize unless
// p ≥ 1 and 0 ≤ s ≤ P.
func NewSRHT(p, s int, r *rand.Rand) (*SRHT, error) {
	if p < 1 {
		return nil, fmt.Errorf("%w: input length p = %d, want ≥ 1", ErrSketchSize, p)
	}
	pad := PaddedLen(p)
	if s < 0 || s > pad {
		return nil, fmt.Errorf("%w: sketch width s = %d, want 0 (no sketch) or 1..%d (P = %d padded from %d)", ErrSketchSize, s, pad, pad, p)
	}
	t := &SRHT{p: p, pad: pad, s: s}
	if s == 0 {
		return t, nil
	}
	t.signs = make([]float64, pad)
	for k := range t.signs {
		if r.Uint64()>>63 == 0 {
			t.signs[k] = 1
		} else {
			t.signs[k] = -1
		}
	}
	perm := make([]int, pad)
	for i := range perm {
		perm[i] = i
	}
	for i := 0; i < s; i++ {
		j := i + r.IntN(pad-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	t.rows = slices.Clip(perm[:s])
	slices.Sort(t.rows)
	return t, nil
}

// InLen is p, the length of the vectors S acts on.
func (t *SRHT) InLen() int { return t.p }

// PaddedLen is P, the power of two the input is padded to (defined also when s == 0).
func (t *SRHT) PaddedLen() int { return t.pad }

// S is the sketch width; 0 means no sketch.
func (t *SRHT) S() int { return t.s }

// OutLen is the length of S v: s, or p when s == 0.
func (t *SRHT) OutLen() int {
	if t.s == 0 {
		return t.p
	}
	return t.s
}

// WorkLen is the length of the work buffer ApplyTo needs: P, or 0 when s == 0.
func (t *SRHT) WorkLen() int {
	if t.s == 0 {
		return 0
	}
	return t.pad
}

// Signs returns the diagonal of D (len P; nil when s == 0). The caller must not modify it.
func (t *SRHT) Signs() []float64 { return t.signs }

// Rows returns the rows R keeps, ascending (len s; nil when s == 0). The caller must not
// modify it.
func (t *SRHT) Rows() []int { return t.rows }

// ApplyTo writes S v into dst (len OutLen) using work (len ≥ WorkLen) as scratch. v (len
// InLen) is not modified; work is overwritten. It allocates nothing and panics on wrong
// lengths.
func (t *SRHT) ApplyTo(dst, v, work []float64) {
	t.applyScaledTo(dst, v, work, 1)
}

// applyScaledTo writes c·S v into dst: with u = D [v; 0],
//
//	dst[i] = c · sqrt(P/s) · (H u)[rows[i]] = c/sqrt(s) · (H_P u)[rows[i]]
//
// where H_P = sqrt(P)·H is the ±1 Hadamard matrix, so the only scaling pass is the
// gather. With s == 0, dst = c·v.
func (t *SRHT) applyScaledTo(dst, v, work []float64, c float64) {
	if len(v) != t.p || len(dst) != t.OutLen() || len(work) < t.WorkLen() {
		panic(fmt.Sprintf("entk: SRHT.ApplyTo lengths dst %d, v %d, work %d; want %d, %d, ≥ %d",
			len(dst), len(v), len(work), t.OutLen(), t.p, t.WorkLen()))
	}
	if t.s == 0 {
		for i, x := range v {
			dst[i] = c * x
		}
		return
	}
	u := work[:t.pad]
	mulTo(u, t.signs[:len(v)], v)
	clear(u[len(v):])
	fwht(u, 1)
	c /= math.Sqrt(float64(t.s))
	for i, r := range t.rows {
		dst[i] = c * u[r]
	}
}
