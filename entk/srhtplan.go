package entk

import (
	"fmt"
	"math"
	"math/bits"
)

// srhtPlan applies an SRHT S = √(P/s)·R·H·D to vectors whose length p is below the padded
// P, computing only what R keeps. With P = P_hi·B (B a power of two) and Sylvester order,
// H_P = H_{P_hi} ⊗ H_B: row r = r_hi·B + r_lo of H_P u is
//
//	(H_P u)[r] = Σ_{j < P_hi} (−1)^{popcount(j AND r_hi)} (H_B u_j)[r_lo],
//
// u_j the j-th block of length B. Blocks past the p inputs are zero, so only the nb =
// ⌈p/B⌉ leading blocks are transformed (nb·B·log₂B butterflies instead of P·log₂P) and
// each of the s kept rows sums nb terms. B minimizes that cost (see newSRHTPlan). The
// result equals SRHT.applyScaledTo up to rounding (the same sums, in another order).
//
// The last block holds only t = p − (nb−1)·B inputs; with T the smallest power of two
// ≥ t, u_j = e_0 ⊗ u_j[:T] and H_B = H_{B/T} ⊗ H_T give (H_B u_j)[r_lo] =
// (H_T u_j[:T])[r_lo mod T], so only T entries of it are transformed.
//
// (Moved from query.go, where Query uses it, to be shared with Sketch.FeaturesTo; the
// applyScaledTo loop was reorganized block by block, see there, with the same
// arithmetic.)
type srhtPlan struct {
	t      *SRHT
	lb, nb int // B = 1<<lb, blocks transformed
	tail   int // T, the transformed length of the last block

	// The kept rows, ascending, fall in groups of equal r_hi: group g is rows
	// grp[g] ≤ i < grp[g+1], all with r_hi = hi[g]; lo[i] = r_lo of row i.
	grp, hi []int
	lo      []int32
}

// maxPlanBlocks bounds nb. It once sized a fixed array of signs; it stays so that the
// choice of B, hence the rounding of Query's ψ, is what it was.
const maxPlanBlocks = 64

func newSRHTPlan(t *SRHT) srhtPlan {
	pl := srhtPlan{t: t}
	if t.s == 0 {
		return pl
	}
	// Cost model: one unit per butterfly, four per gathered term (measured on the MNIST
	// convnet, P = 20490, s = 1024: a gathered term — a strided load, a sign, a dependent
	// add — costs about four butterflies of the in-L1 radix-8 FWHT). There it picks
	// B = 2048: 11 blocks, 11 terms per kept row.
	best := math.Inf(1)
	for lb := 1; 1<<lb <= t.pad; lb++ {
		B := 1 << lb
		nb := (t.p + B - 1) / B
		if nb > maxPlanBlocks {
			continue // B = P (nb = 1) always qualifies
		}
		cost := float64(nb*B*lb) + 4*float64(t.s*nb)
		if cost < best {
			best, pl.lb, pl.nb = cost, lb, nb
		}
	}
	B := 1 << pl.lb
	pl.tail = 1
	for pl.tail < t.p-(pl.nb-1)*B {
		pl.tail <<= 1
	}
	pl.lo = make([]int32, len(t.rows))
	for i, r := range t.rows {
		pl.lo[i] = int32(r & (B - 1))
		if rh := r >> pl.lb; i == 0 || rh != pl.hi[len(pl.hi)-1] {
			pl.grp = append(pl.grp, i)
			pl.hi = append(pl.hi, rh)
		}
	}
	pl.grp = append(pl.grp, len(t.rows))
	return pl
}

// applyScaledTo writes c·S v into dst (len OutLen), with work (len ≥ WorkLen) as scratch.
// It is the loop
//
//	for i, r := range rows {
//		s := 0.0
//		for j := 0; j < nb; j++ { s += (−1)^{popcount(j AND r_hi)} · (H_B u_j)[r_lo] }
//		dst[i] = c/√s_width · s
//	}
//
// run block-major, dst holding the partial sums: each block is sign-flipped, transformed
// and added into the kept rows while it sits in L1 (16 KiB at B = 2048), instead of the
// nb blocks being gathered at a stride of B, whose addresses share a cache set. Every
// dst[i] sees the same additions in the same order as in the loop, so the result is the
// same bit for bit.
func (pl *srhtPlan) applyScaledTo(dst, v, work []float64, c float64) {
	t := pl.t
	if t.s == 0 || pl.nb*(1<<pl.lb) == t.pad {
		t.applyScaledTo(dst, v, work, c)
		return
	}
	if len(v) != t.p || len(dst) != t.s || len(work) < t.pad {
		panic(fmt.Sprintf("entk: srhtPlan.applyScaledTo lengths dst %d, v %d, work %d; want %d, %d, ≥ %d",
			len(dst), len(v), len(work), t.s, t.p, t.pad))
	}
	B := 1 << pl.lb
	for j := 0; j < pl.nb; j++ {
		n := B
		if j == pl.nb-1 {
			n = pl.tail
		}
		u := work[:n]
		k0 := j * B
		k1 := min(k0+n, len(v))
		vj := v[k0:k1]
		fwhtSigned(u, vj, t.signs[k0:k1])
		mask := int32(n - 1)
		for g, rh := range pl.hi {
			sg := 1 - 2*float64(bits.OnesCount(uint(j&rh))&1)
			d, lo := dst[pl.grp[g]:pl.grp[g+1]], pl.lo[pl.grp[g]:pl.grp[g+1]]
			if j == 0 {
				for i, rl := range lo {
					d[i] = zero + sg*u[rl&mask]
				}
				continue
			}
			for i, rl := range lo {
				d[i] += sg * u[rl&mask]
			}
		}
	}
	c /= math.Sqrt(float64(t.s))
	for i, s := range dst {
		dst[i] = c * s
	}
}

// zero is the loop's initial partial sum 0.0 + x, which differs from x when x = −0; a
// variable so that the addition is not folded away.
var zero = 0.0
