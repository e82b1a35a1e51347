package certify

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cairnhq/cairn/internal/base/knn"
	"gonum.org/v1/gonum/mat"
)

// Encoder is the kernel encoder z(x) = Σ_j k(x, x̃_j) a_j + b of paper eq. app-encoder:
// row j of A (M×k) is landmark j's coefficient vector a_j. Functions taking an Encoder
// never modify it.
type Encoder struct {
	A *mat.Dense
	B []float64
}

// EmbedTo writes z = K A + b for the rows of k (n×M) into dst (n×k), dropping the terms of
// the landmarks in removed (paper appendix D: deleting S drops its terms, every other
// parameter unchanged):
//
//	dst[i,:] = b + Σ_{j ∉ removed} k[i,j]·A[j,:]
func (e Encoder) EmbedTo(dst *mat.Dense, k *mat.Dense, removed []int) {
	n, m := k.Dims()
	am, ak := e.A.Dims()
	if am != m || len(e.B) != ak {
		panic(fmt.Sprintf("certify: encoder %d×%d with bias %d against kernel %d×%d", am, ak, len(e.B), n, m))
	}
	if len(removed) == 0 {
		dst.Mul(k, e.A)
	} else {
		keep := make([]bool, m)
		for j := range keep {
			keep[j] = true
		}
		for _, j := range removed {
			keep[j] = false
		}
		a := mat.DenseCopyOf(e.A)
		for j := 0; j < m; j++ {
			if !keep[j] {
				for c := 0; c < ak; c++ {
					a.Set(j, c, 0)
				}
			}
		}
		dst.Mul(k, a)
	}
	for i := 0; i < n; i++ {
		row := dst.RawRowView(i)
		for c, v := range e.B {
			row[c] += v
		}
	}
}

// Confidence is conf(·) of paper appendix D: the mean share of each test embedding's
// knn.ConfidenceK cosine nearest neighbours in the reference set that carry its majority
// class, with the landmarks in removed dropped from the encoder on both sides.
func Confidence(e Encoder, ref, test *mat.Dense, refLabels []int, removed []int) (float64, error) {
	nr, _ := ref.Dims()
	nt, _ := test.Dims()
	_, k := e.A.Dims()
	zr := mat.NewDense(nr, k, nil)
	e.EmbedTo(zr, ref, removed)
	zt := mat.NewDense(nt, k, nil)
	e.EmbedTo(zt, test, removed)
	cl, err := knn.New(zr, refLabels)
	if err != nil {
		return 0, err
	}
	p, err := cl.Predict(zt, knn.ConfidenceK)
	if err != nil {
		return 0, err
	}
	return knn.Confidence(p), nil
}

// DeletionEffect is Δ(S) = conf(A, b) − conf(A, b; landmarks S removed) (paper appendix D),
// given the unmodified confidence full (from Confidence with no removal) so that one
// baseline serves every set.
func DeletionEffect(full float64, e Encoder, ref, test *mat.Dense, refLabels []int, s []int) (float64, error) {
	c, err := Confidence(e, ref, test, refLabels, s)
	if err != nil {
		return 0, err
	}
	return full - c, nil
}

// ContributionTo writes each landmark's contribution score (paper appendix D: the
// magnitude of its term k(x, x̃_j) a_j in the latent, aggregated over the training set)
// into dst (len M), as the mean over the rows of k (training points × M):
//
//	dst[j] = (1/n) Σ_i |k[i,j]| · ||A[j,:]||₂
func ContributionTo(dst []float64, e Encoder, k *mat.Dense) {
	n, m := k.Dims()
	if len(dst) != m {
		panic("certify: ContributionTo: wrong dst length")
	}
	for j := 0; j < m; j++ {
		var s float64
		for i := 0; i < n; i++ {
			s += math.Abs(k.At(i, j))
		}
		dst[j] = s / float64(n) * rowNorm(e.A, j)
	}
}

// LeaveOneOutTo writes each landmark's leave-one-out score (paper appendix D: the change
// in the training-set latents when landmark j alone is removed) into dst (len M). The
// change is measured on normalized latents, the geometry the k-NN evaluation sees, which
// makes it differ from the contribution score (a term along z_i changes z_i's norm, not
// its direction):
//
//	dst[j] = (1/n) Σ_i || ẑ_i − normalize(z_i − k[i,j]·A[j,:]) ||₂,   ẑ = z/||z||
func LeaveOneOutTo(dst []float64, e Encoder, k *mat.Dense) {
	n, m := k.Dims()
	if len(dst) != m {
		panic("certify: LeaveOneOutTo: wrong dst length")
	}
	_, kk := e.A.Dims()
	z := mat.NewDense(n, kk, nil)
	e.EmbedTo(z, k, nil)
	zn := make([]float64, n)
	for i := range zn {
		zn[i] = vecNorm(z.RawRowView(i))
	}
	for j := 0; j < m; j++ {
		a := e.A.RawRowView(j)
		var s float64
		for i := 0; i < n; i++ {
			zi, kij := z.RawRowView(i), k.At(i, j)
			var nn float64
			for c, v := range zi {
				w := v - kij*a[c]
				nn += w * w
			}
			nn = math.Sqrt(nn)
			var d2 float64
			for c, v := range zi {
				var u, w float64
				if zn[i] > 0 {
					u = v / zn[i]
				}
				if nn > 0 {
					w = (v - kij*a[c]) / nn
				}
				d2 += (u - w) * (u - w)
			}
			s += math.Sqrt(d2)
		}
		dst[j] = s / float64(n)
	}
}

// TopKIndices returns the indices of the k largest scores, highest first, ties by the
// lower index (the same rule as the certificates).
func TopKIndices(scores []float64, k int) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	return idx[:min(k, len(idx))]
}

func rowNorm(a *mat.Dense, j int) float64 { return vecNorm(a.RawRowView(j)) }

func vecNorm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// ReselectionTo writes the Latent-Space Reselection ranking of the landmarks into dst
// (len M) as scores, higher first: the paper's "reselection in coefficient space" (Fig.
// acc-del (b)), which it does not spell out. Our definition: greedy pivoted Cholesky
// (Prop. greedy, the rule the pool itself is selected by) on the rows of the coefficient
// displacement D = A − A₀ (M×k), instead of on the feature rows. The first pick is the
// landmark of largest ω = ‖D_ℓ‖ (the displacement ranking's top-1); each next pick is the
// landmark whose displacement has the largest part orthogonal to the picks so far, ties
// to the lower index, so the set spans distinct directions of the latent displacement
// instead of repeating one. Landmarks left when that part is zero (beyond the rank of D,
// at most k) follow in decreasing ω. dst[ℓ] = M − (position of ℓ), so TopKIndices(dst, K)
// is the first K picks. a and a0 are not modified.
func ReselectionTo(dst []float64, a, a0 *mat.Dense) {
	m, k := a.Dims()
	if r, c := a0.Dims(); r != m || c != k || len(dst) != m {
		panic(fmt.Sprintf("certify: ReselectionTo: A %d×%d, A0 %d×%d, dst %d", m, k, r, c, len(dst)))
	}
	d := mat.NewDense(m, k, nil)
	d.Sub(a, a0)
	res := make([]float64, m) // squared norm of each row's part orthogonal to the basis
	omega := make([]float64, m)
	var dmax float64
	for l := range m {
		row := d.RawRowView(l)
		res[l] = floats64Dot(row, row)
		omega[l] = math.Sqrt(res[l])
		dmax = math.Max(dmax, res[l])
	}
	picked := make([]bool, m)
	order := make([]int, 0, m)
	var basis [][]float64
	tol := 1e-12 * dmax
	for len(order) < m {
		p, best := -1, tol
		for l := range m {
			if !picked[l] && res[l] > best {
				p, best = l, res[l]
			}
		}
		if p < 0 {
			break
		}
		// b = the pick's part orthogonal to the basis (Gram–Schmidt twice), normalized.
		b := append([]float64(nil), d.RawRowView(p)...)
		for range 2 {
			for _, q := range basis {
				c := floats64Dot(q, b)
				for i := range b {
					b[i] -= c * q[i]
				}
			}
		}
		nb := math.Sqrt(floats64Dot(b, b))
		if !(nb > 0) {
			break
		}
		for i := range b {
			b[i] /= nb
		}
		basis = append(basis, b)
		picked[p] = true
		order = append(order, p)
		for l := range m {
			if !picked[l] {
				c := floats64Dot(b, d.RawRowView(l))
				res[l] = math.Max(0, res[l]-c*c)
			}
		}
	}
	rest := make([]int, 0, m-len(order))
	for l := range m {
		if !picked[l] {
			rest = append(rest, l)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return omega[rest[i]] > omega[rest[j]] })
	order = append(order, rest...)
	for pos, l := range order {
		dst[l] = float64(m - pos)
	}
}

// floats64Dot is Σ a_i b_i.
func floats64Dot(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}
