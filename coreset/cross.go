package coreset

import (
	"fmt"

	"github.com/cairnhq/cairn/internal/base/vec"
)

// CrossToken ties products computed by CrossTo to the landmarks they were computed
// against; InsertCross uses them only while those landmarks are unchanged.
type CrossToken struct {
	pool  *Pool
	gen   uint64
	k, nf int
}

// CrossTo writes the products of nf feature vectors with the pool's greedy landmarks,
//
//	dst[i*Greedy()+j] = <landmark j, f_i>   for i < nf, j < Greedy(),
//
// f_i being f[i*ldf : i*ldf+Dim], and returns the token InsertCross needs. Each value
// has the bits Insert computes for itself (vec.Dot's), but one blocked sweep
// (vec.DotsTo) reads the m×Dim landmark matrix about nf/4 times instead of nf times: a
// batch of inserts computes its products up front. Only the greedy landmarks change
// them (inserts do not), so the products stay valid until a landmark is deleted or a
// sync adopts new ones; InsertCross checks that. It panics on wrong lengths.
func (p *Pool) CrossTo(dst, f []float64, ldf, nf int) CrossToken {
	q, k := p.cfg.Dim, p.kg
	if nf < 0 || len(dst) < nf*k || nf > 0 && (ldf < q || len(f) < (nf-1)*ldf+q) {
		panic(fmt.Sprintf("coreset: CrossTo: len(dst)=%d, len(f)=%d for %d vectors of dim %d at stride %d against %d landmarks", len(dst), len(f), nf, q, ldf, k))
	}
	vec.DotsTo(dst, k, f, ldf, nf, p.feats, q, k, q)
	return CrossToken{pool: p, gen: p.lmGen, k: k, nf: nf}
}

// InsertCross is Insert(id, f) given cross = the products of f computed by CrossTo
// (row i of its dst, len Greedy()) with token tok. When the landmarks changed since
// (a landmark deletion or a sync in between), or tok is another pool's, it computes the
// products itself, as Insert does; either way the result is Insert's bit for bit.
func (p *Pool) InsertCross(id string, f, cross []float64, tok CrossToken) error {
	if tok.pool != p || tok.gen != p.lmGen || tok.k != p.kg || len(cross) != p.kg {
		cross = nil
	}
	return p.insert(id, f, cross)
}
