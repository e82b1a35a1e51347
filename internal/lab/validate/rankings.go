package validate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// The rankings of the served model (docs/architecture.md, "Certificates and verdicts"),
// in the order a report lists them, named as serving's answers name them
// (certify.Ranking), and ENTKCosine, a fit-free variation of entk that no answer serves:
// k*(x_t, x_ℓ)/√k*(x_ℓ, x_ℓ), the exact similarity with each landmark's own norm divided
// out (the query's is the same for every landmark and leaves the ranking unchanged), so
// that high-norm landmarks do not top every query's ranking.
const (
	Displacement = string(certify.Displacement)
	Representer  = string(certify.Representer)
	ENTK         = string(certify.Similarity)
	ENTKCosine   = "entk_cosine"
)

// Rankings lists the landmark rankings the study scores.
var Rankings = []string{Displacement, Representer, ENTK, ENTKCosine}

// CosineTo writes ENTKCosine's scores, dst[ℓ] = k[ℓ]/√self[ℓ], with k the query's
// kernel row and self the landmarks' k(x_ℓ, x_ℓ) in the same units; a landmark of zero
// self-similarity scores 0 (its kernel row is 0 too).
func CosineTo(dst, k, self []float64) {
	if len(dst) != len(k) || len(self) != len(k) {
		panic(fmt.Sprintf("validate: CosineTo lengths dst %d, k %d, self %d", len(dst), len(k), len(self)))
	}
	for l, v := range k {
		dst[l] = 0
		if self[l] > 0 {
			dst[l] = v / math.Sqrt(self[l])
		}
	}
}

// The baselines, scored over every stored point. Class is a label-only reference, not an
// attribution: it scores 1 for the points of the query's own class and 0 for the others,
// so its LDS is what the class composition of a half alone predicts.
const (
	Random   = "random"
	TRAKName = "trak"
	Class    = "class"
)

// Baselines lists the baselines the study scores.
var Baselines = []string{Random, TRAKName, Class}

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
// that latent, in the served encoder's units, as serving.Model.AnswerRanked ranks it
// (certify.RepresenterTo, whose radii are dropped): with a (M×c) the coefficients Ã in
// the fit's kernel units, b the bias and scale the factor the fit's kernel blocks were
// multiplied by (serving.Model.Scale), the latent is
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
	rows := a.RawMatrix()
	flat := rows.Data
	if rows.Stride != c {
		flat = make([]float64, 0, m*c)
		for l := range m {
			flat = append(flat, a.RawRowView(l)...)
		}
	}
	certify.RepresenterTo(dst, make([]float64, m), make([]float64, c), k, make([]float64, m), flat[:m*c], b, scale)
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

// ClassScoresTo writes the class baseline's scores for a query of label y: 1 for every
// point whose label is y, 0 for the others.
func ClassScoresTo(dst []float64, labels []int, y int) {
	if len(dst) != len(labels) {
		panic(fmt.Sprintf("validate: ClassScoresTo: dst %d for %d labels", len(dst), len(labels)))
	}
	for i, l := range labels {
		dst[i] = 0
		if l == y {
			dst[i] = 1
		}
	}
}

// SignedTo writes a ranking's scores signed by class: dst[i] = scores[i] for the points of
// class y and −scores[i] for the others, so that a point similar to the query but of
// another class counts against it. With y the class the served network predicts for the
// query, it needs no label of the query.
func SignedTo(dst, scores []float64, labels []int, y int) {
	if len(dst) != len(scores) || len(labels) != len(scores) {
		panic(fmt.Sprintf("validate: SignedTo lengths dst %d, scores %d, labels %d", len(dst), len(scores), len(labels)))
	}
	for i, l := range labels {
		dst[i] = scores[i]
		if l != y {
			dst[i] = -scores[i]
		}
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
