package validate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/rng"
)

// The rankings of the served model (DESIGN.md section 5), in the order a report lists
// them.
const (
	Displacement = "displacement"
	Representer  = "representer"
	ENTK         = "entk"
)

// Rankings lists the landmark rankings the study scores.
var Rankings = []string{Displacement, Representer, ENTK}

// The baselines, scored over every stored point.
const (
	Random   = "random"
	TRAKName = "trak"
)

// Baselines lists the baselines the study scores.
var Baselines = []string{Random, TRAKName}

// DisplacementTo writes the paper's influence of each landmark on the query (eq.
// influence), what serving.Model.Answer ranks:
//
//	dst[ℓ] = k[ℓ]·omega[ℓ]
//
// with k the query's kernel row and omega the displacements ‖Ã_ℓ − Ã_{0,ℓ}‖₂, both in raw
// kernel units.
func DisplacementTo(dst, k, omega []float64) {
	if len(dst) != len(k) || len(omega) != len(k) {
		panic(fmt.Sprintf("validate: DisplacementTo lengths dst %d, k %d, omega %d", len(dst), len(k), len(omega)))
	}
	for l, v := range k {
		dst[l] = v * omega[l]
	}
}

// RepresenterTo writes each landmark's contribution to the query's latent, projected on
// that latent, in the served encoder's units: with a (M×c) the coefficients Ã in the fit's
// kernel units, b the bias and scale the factor the fit's kernel blocks were multiplied by
// (serving.Model.Scale), the latent is
//
//	z = scale·Σ_ℓ k[ℓ]·a[ℓ,:] + b
//
// and
//
//	dst[ℓ] = scale·k[ℓ]·⟨a[ℓ,:], z⟩ / ‖z‖₂
//
// so Σ_ℓ dst[ℓ] + ⟨b, z⟩/‖z‖ = ‖z‖. A zero latent has no direction: dst is then zero.
// k is the query's raw kernel row.
func RepresenterTo(dst, k []float64, a *mat.Dense, b []float64, scale float64) {
	m, c := a.Dims()
	if len(dst) != m || len(k) != m || len(b) != c {
		panic(fmt.Sprintf("validate: RepresenterTo lengths dst %d, k %d, b %d for a %d×%d", len(dst), len(k), len(b), m, c))
	}
	z := make([]float64, c)
	for l, kv := range k {
		for j, v := range a.RawRowView(l) {
			z[j] += kv * v
		}
	}
	var nz float64
	for j := range z {
		z[j] = scale*z[j] + b[j]
		nz += z[j] * z[j]
	}
	if nz == 0 {
		clear(dst)
		return
	}
	inv := scale / math.Sqrt(nz)
	for l, kv := range k {
		var p float64
		for j, v := range a.RawRowView(l) {
			p += v * z[j]
		}
		dst[l] = inv * kv * p
	}
}

// PointSumTo writes the point scores of landmark-row scores: dst[i] = Σ_{ℓ: point[ℓ]=i}
// rows[ℓ], so a point that is a landmark of both views gets the sum of its two terms and
// a point that is no landmark 0. dst is cleared first; point[ℓ] must index dst.
func PointSumTo(dst, rows []float64, point []int) {
	if len(rows) != len(point) {
		panic(fmt.Sprintf("validate: PointSumTo: %d row scores for %d landmark points", len(rows), len(point)))
	}
	clear(dst)
	for l, i := range point {
		dst[i] += rows[l]
	}
}

// RandomStream names the stream of the random baseline's scores for query t:
// rng.Sub(RandomStream, t) under the seed.
const RandomStream = "lab/validate/random"

// RandomScoresTo writes the random baseline's scores for query t: iid uniform on [0, 1)
// per point, from the stream rng.Sub(RandomStream, t) of seed.
func RandomScoresTo(dst []float64, seed uint64, t int) {
	r := rng.New(seed, rng.Sub(RandomStream, t))
	for i := range dst {
		dst[i] = r.Float64()
	}
}
