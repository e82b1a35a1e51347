package serving

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/knn"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// Effect is the deletion Effect of appendix D for one deleted point: Δ(S) for S its
// landmark terms in the serving model, against N random landmark sets of the same size.
type Effect struct {
	Model      uint64    `json:"model"`
	Landmarks  int       `json:"landmarks"` // |S|
	Effect     float64   `json:"Effect"`
	Percentile float64   `json:"percentile"`
	PValue     float64   `json:"p_value"`
	Random     []float64 `json:"random"`
	// Reason says why no Effect was computed (no model, no labels, not a landmark).
	Reason string `json:"reason,omitempty"`
}

// DeletionEffect computes Δ(S) (paper appendix D) for the landmark terms of id in s:
// the drop of the mean 50-NN cosine confidence of the audit test embeddings against the
// labelled reference embeddings when S's terms leave the encoder (both sides), and
// Δ(R_t) for n random sets of |S| unmasked landmarks drawn from the stream
// "daemon/audit/<request>" of seed. Landmarks already masked in s stay removed in every
// term. Removing a set is a rank-|S| update of precomputed embeddings:
//
//	Z_S = Z − K[:, S] A[S, :]
func (s *Model) DeletionEffect(id, request string, n int, seed uint64) *Effect {
	e := &Effect{Model: s.Version, Percentile: -1, PValue: 1}
	var set, others []int
	for l, lid := range s.LandmarkIDs {
		switch {
		case lid == id:
			set = append(set, l)
		case s.masked[l]:
			others = append(others, l)
		}
	}
	e.Landmarks = len(set)
	switch {
	case len(set) == 0:
		e.Reason = "not a landmark of the serving model: its term was not in the encoder"
		return e
	case s.audit == nil:
		e.Reason = "no labelled audit Points: the confidence needs labels"
		return e
	}
	base, err := s.auditConfidence(others, nil)
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	c, err := s.auditConfidence(others, set)
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	e.Effect = base - c
	var pool []int
	for l := range s.LandmarkIDs {
		if !s.masked[l] && !slices.Contains(set, l) && !slices.Contains(others, l) {
			pool = append(pool, l)
		}
	}
	if len(pool) < len(set) {
		e.Reason = "too few landmarks for random sets"
		return e
	}
	e.Random, err = s.randomEffects(base, others, pool, len(set), n, rng.New(seed, "daemon/audit/"+request))
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	if e.Percentile, err = certify.Percentile(e.Effect, e.Random); err != nil {
		e.Reason = err.Error()
		return e
	}
	if e.PValue, err = certify.PermutationPValue(e.Effect, e.Random); err != nil {
		e.Reason = err.Error()
		return e
	}
	if math.IsNaN(e.Effect) {
		e.Reason = "confidence is not finite"
	}
	return e
}

// randomEffects returns Δ(R_t) = base − confidence without R_t for n random sets R_t of
// size landmarks from pool, each the first size entries of a permutation of pool drawn
// from r, with the landmarks others removed in every term. On an error it returns the
// effects computed so far with it.
func (s *Model) randomEffects(base float64, others, pool []int, size, n int, r *rand.Rand) ([]float64, error) {
	var out []float64
	for range n {
		sub := make([]int, size)
		perm := r.Perm(len(pool))
		for i := range sub {
			sub[i] = pool[perm[i]]
		}
		c, err := s.auditConfidence(others, sub)
		if err != nil {
			return out, err
		}
		out = append(out, base-c)
	}
	return out, nil
}

// auditConfidence is the mean 50-NN cosine confidence of the audit test embeddings
// against the labelled reference embeddings with the terms of the landmarks others, then
// sub, removed from both sides (Z − K[:, l] A[l, :] for each); the audit embeddings are
// those of the unmasked model. s.audit must be non-nil; it is not modified.
func (s *Model) auditConfidence(others, sub []int) (float64, error) {
	a := s.audit
	zr := mat.DenseCopyOf(a.zRef)
	zt := mat.DenseCopyOf(a.zTest)
	for _, l := range slices.Concat(others, sub) {
		arow := s.enc.A.RawRowView(l)
		for i := range zr.RawMatrix().Rows {
			kv := a.KRef.At(i, l)
			row := zr.RawRowView(i)
			for c, v := range arow {
				row[c] -= kv * v
			}
		}
		for i := range zt.RawMatrix().Rows {
			kv := a.KTest.At(i, l)
			row := zt.RawRowView(i)
			for c, v := range arow {
				row[c] -= kv * v
			}
		}
	}
	cl, err := knn.New(zr, a.RefLabels)
	if err != nil {
		return 0, err
	}
	p, err := cl.Predict(zt, min(knn.ConfidenceK, len(a.RefLabels)))
	if err != nil {
		return 0, err
	}
	return knn.Confidence(p), nil
}
