package coreset

import (
	"fmt"
	"math"
)

// ResidualCurveTo writes into dst[t] the residual trace tr R of the nested prefix
// order[:t+1] of landmarks over the rows of g (n×q), for any selector's order (Prop. greedy
// ii gives the budget curve of greedy for free; other selectors need this pass). It runs
// Gram–Schmidt along order in O(n q len(order)) time and O(q len(order) + n) memory; a
// landmark already spanned to within DefaultTol of its own norm adds nothing.
func ResidualCurveTo(dst []float64, g []float64, n, q int, order []int) {
	if len(dst) != len(order) || len(g) != n*q {
		panic(fmt.Sprintf("coreset: ResidualCurveTo: len(dst)=%d, len(order)=%d, len(g)=%d, n=%d, q=%d", len(dst), len(order), len(g), n, q))
	}
	delta := make([]float64, n)
	for j := range delta {
		delta[j] = dot(g[j*q:(j+1)*q], g[j*q:(j+1)*q])
	}
	basis := make([]float64, 0, len(order)*q)
	v := make([]float64, q)
	nb := 0
	prev := 0.0
	for _, d := range delta {
		prev += d
	}
	for t, p := range order {
		if p < 0 || p >= n {
			panic(fmt.Sprintf("coreset: ResidualCurveTo: order[%d]=%d out of range", t, p))
		}
		copy(v, g[p*q:(p+1)*q])
		norm0 := math.Sqrt(dot(v, v))
		for pass := 0; pass < 2; pass++ {
			for i := 0; i < nb; i++ {
				b := basis[i*q : (i+1)*q]
				axpy(v, -dot(b, v), b)
			}
		}
		nv := math.Sqrt(dot(v, v))
		if !(nv > math.Sqrt(DefaultTol)*norm0) || nv == 0 {
			dst[t] = prev
			continue
		}
		for k := range v {
			v[k] /= nv
		}
		basis = append(basis, v...)
		b := basis[nb*q : (nb+1)*q]
		nb++
		var tr float64
		for j := 0; j < n; j++ {
			l := dot(b, g[j*q:(j+1)*q])
			d := delta[j] - l*l
			if d < 0 {
				d = 0
			}
			delta[j] = d
			tr += d
		}
		dst[t], prev = tr, tr
	}
}

// PowerLaw is a least-squares fit of log y = log C − β log m.
type PowerLaw struct {
	C, Beta float64
	// R2 is the coefficient of determination of the log-log fit.
	R2 float64
	// Points is the number of positive points used.
	Points int
}

// FitPowerLaw fits y(m) ≈ C m^{−β} to the points (m, y) with y > 0 by least squares in
// log-log space. For the residual curve under a spectrum λ_i ∝ i^{−α}, Cor. noknee gives
// β ≈ α − 1 and no knee: each multiplicative increase of m buys the same multiplicative
// drop. It needs at least two positive points with distinct m.
func FitPowerLaw(m []float64, y []float64) (PowerLaw, error) {
	if len(m) != len(y) {
		panic("coreset: FitPowerLaw: len(m) != len(y)")
	}
	var xs, ys []float64
	for i := range m {
		if m[i] > 0 && y[i] > 0 && !math.IsInf(y[i], 0) {
			xs = append(xs, math.Log(m[i]))
			ys = append(ys, math.Log(y[i]))
		}
	}
	if len(xs) < 2 {
		return PowerLaw{}, fmt.Errorf("%w: %d points", ErrFit, len(xs))
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxx, sxy, syy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
		syy += (ys[i] - my) * (ys[i] - my)
	}
	if sxx == 0 {
		return PowerLaw{}, fmt.Errorf("%w: all m equal", ErrFit)
	}
	slope := sxy / sxx
	pl := PowerLaw{Beta: -slope, C: math.Exp(my - slope*mx), Points: len(xs), R2: 1}
	if syy > 0 {
		pl.R2 = sxy * sxy / (sxx * syy)
	}
	return pl, nil
}

// Coverage returns the KREPES class coverage number κ_C of a ranked landmark list (Prop.
// coverage): the length of the shortest prefix of order whose labels include every class
// present in labels, and the number of distinct classes the whole list sees. The paper
// ranks by ω_ℓ after a fit; before a fit the natural ranking is the selection order. κ_C
// is −1 when some class never appears in order (it stays uncovered at every rank).
func Coverage(labels []int, order []int) (kappa, seen, classes int) {
	all := map[int]bool{}
	for _, l := range labels {
		all[l] = true
	}
	classes = len(all)
	got := map[int]bool{}
	kappa = -1
	for t, p := range order {
		l := labels[p]
		if !got[l] {
			got[l] = true
			if len(got) == classes && kappa < 0 {
				kappa = t + 1
			}
		}
	}
	return kappa, len(got), classes
}
