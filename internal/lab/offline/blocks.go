package offline

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/fit"
	"github.com/cairnhq/cairn/internal/base/rng"
)

// BlockInfo describes the kernel blocks Blocks built: their sizes, and the landmarks a
// fitted model attributes to.
type BlockInfo struct {
	M, NTrain, NVal, NTest int
	// Balanced is set for Adult, whose accuracy is balanced accuracy.
	Balanced bool
	Phases   map[string]float64
	// The landmarks for attribution: the backbone, each landmark's input (the augmented
	// view the pool selected, M×D), its id ("<point id>#A" or "#B"), and the pool's
	// residual certificate (view A then view B summed).
	Backbone    entk.Backbone
	LandmarkX   []float64
	LandmarkIDs []string
	LandmarkLab []int // labels of the landmark points (nil without labels)
	Classes     int   // number of classes of the data set
	TraceR      float64
	TraceK      float64
}

// Blocks builds the fit's kernel blocks with Prepare's pipeline: Load loads the rows
// and both views; the validation rows are split off (ValSplit); the training rows'
// features are computed (Featurize: float32 rows, as the daemon keeps them); the landmark
// pool is selected on the training rows only, so no validation point is a landmark;
// K_A, K_B come from kernelBlocks, K_mm, K_val and K_test from the same landmark features
// (validation and test points unaugmented, through the same sketch, featureChunk rows at
// a time). With a cache, the loaded and featurized training rows are taken from it when
// its settings and validation fraction match, and left in it otherwise.
func Blocks(ctx context.Context, pf *Pipeline, selector string, valFrac float64, testN int, cache *BlockCache) (*fit.Problem, *BlockInfo, error) {
	split, phases, err := cache.split(pf, valFrac)
	if err != nil {
		return nil, nil, err
	}
	prep, tr, valRows := split.all, split.train, split.val
	set := prep.Set
	t0 := time.Now()
	vs, err := split.selection(ctx, selector, pf.M, pf.Seed, pf.Rule())
	if err != nil {
		return nil, nil, fmt.Errorf("--selector %q: %w", selector, err)
	}
	ka, kb := kernelBlocks(tr, vs)
	phases["select_and_blocks"] = time.Since(t0).Seconds()
	t0 = time.Now()
	n, mm, q := tr.Set.N, vs.M, vs.Q
	lm := mat.NewDense(mm, q, vs.Landmarks)
	kmm := mat.NewDense(mm, mm, nil)
	kmm.Mul(lm, lm.T())
	against := func(x []float64, rows int) *mat.Dense { return kernelAgainst(prep.Features, x, rows, lm) }
	d := set.D
	vx := make([]float64, 0, len(valRows)*d)
	vl := make([]int, 0, len(valRows))
	for _, r := range valRows {
		vx = append(vx, set.Row(r)...)
		vl = append(vl, set.Labels[r])
	}
	prob := &fit.Problem{
		KA: mat.NewDense(n, mm, ka), KB: mat.NewDense(n, mm, kb), Kmm: kmm, IDs: tr.Set.IDs,
		Val: fit.Split{K: against(vx, len(valRows)), Labels: vl},
	}
	info := &BlockInfo{M: mm, NTrain: n, NVal: len(valRows), Balanced: set.Name == "adult", Phases: phases, Backbone: prep.Features.Backbone(), Classes: set.Classes}
	info.addLandmarks(tr, vs)
	if testN > 0 {
		ts, err := dataset.Open(pf.Data, "test", testN)
		if err != nil {
			return nil, nil, fmt.Errorf("--test-n %d: %w", testN, err)
		}
		if ts.D != d || ts.Labels == nil {
			return nil, nil, fmt.Errorf("--data %q: test split has %d features (train %d) or no labels", pf.Data, ts.D, d)
		}
		prob.Test = fit.Split{K: against(ts.X, ts.N), Labels: ts.Labels}
		info.NTest = ts.N
	}
	phases["val_test_blocks"] = time.Since(t0).Seconds()
	return prob, info, nil
}

// addLandmarks records the landmarks of the pool vs over the training rows tr: their
// inputs, ids, labels and the pool's residual certificate.
func (info *BlockInfo) addLandmarks(tr *Prepared, vs *ViewSelection) {
	d := tr.Set.D
	for v, sel := range []*coreset.Selection{vs.A, vs.B} {
		view, suffix := tr.ViewA, "#A"
		if v == 1 {
			view, suffix = tr.ViewB, "#B"
		}
		for _, i := range sel.Indices {
			info.LandmarkX = append(info.LandmarkX, view[i*d:(i+1)*d]...)
			info.LandmarkIDs = append(info.LandmarkIDs, tr.Set.IDs[i]+suffix)
			if tr.Set.Labels != nil {
				info.LandmarkLab = append(info.LandmarkLab, tr.Set.Labels[i])
			}
		}
		if len(sel.ResidualTrace) > 0 {
			info.TraceR += sel.ResidualTrace[len(sel.ResidualTrace)-1]
			info.TraceK += sel.Trace
		}
	}
}

// ValSplit returns the training and validation row indices (each ascending): the
// validation rows are the round(frac·N) rows whose ids come first under a hash keyed by
// rng.Seed(seed, "cairnctl/fit/val"), so the split depends only on the ids.
func ValSplit(ids []string, frac float64, seed uint64) (train, val []int) {
	key := rng.Seed(seed, "cairnctl/fit/val")
	type hk struct {
		h uint64
		i int
	}
	hs := make([]hk, len(ids))
	var kb [8]byte
	binary.BigEndian.PutUint64(kb[:], key)
	for i, id := range ids {
		f := fnv.New64a()
		f.Write(kb[:])
		f.Write([]byte(id))
		hs[i] = hk{f.Sum64(), i}
	}
	slices.SortFunc(hs, func(a, b hk) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(ids[a.i], ids[b.i])
	})
	nv := int(math.Round(frac * float64(len(ids))))
	for j, x := range hs {
		if j < nv {
			val = append(val, x.i)
		} else {
			train = append(train, x.i)
		}
	}
	slices.Sort(train)
	slices.Sort(val)
	return train, val
}

// SubsetPrepared returns prep restricted to rows: inputs and views copied (N×D), feature
// rows (where computed) shared, not copied. prep is not modified.
func SubsetPrepared(prep *Prepared, rows []int) *Prepared {
	s, d := prep.Set, prep.Set.D
	sub := &dataset.Set{Name: s.Name, N: len(rows), D: d, Shape: s.Shape, Classes: s.Classes}
	out := &Prepared{Set: sub, Features: prep.Features, Q: prep.Q, Seconds: prep.Seconds}
	for _, r := range rows {
		sub.X = append(sub.X, s.X[r*d:(r+1)*d]...)
		sub.IDs = append(sub.IDs, s.IDs[r])
		if s.Labels != nil {
			sub.Labels = append(sub.Labels, s.Labels[r])
		}
		out.ViewA = append(out.ViewA, prep.ViewA[r*d:(r+1)*d]...)
		out.ViewB = append(out.ViewB, prep.ViewB[r*d:(r+1)*d]...)
		if prep.FeatA != nil {
			out.FeatA = append(out.FeatA, prep.FeatA[r])
			out.FeatB = append(out.FeatB, prep.FeatB[r])
		}
	}
	return out
}

// fitSplit is the part of Blocks that does not depend on the selector: the loaded
// rows (all), the training rows with their features (train) and the validation rows'
// indices into all (val).
type fitSplit struct {
	all, train *Prepared
	val        []int
	// sels are the selections made on train, by selector, budget and seed: a selection
	// does not depend on the loss or the initializer, so the fits of a table that differ
	// only in those share it. The landmark features are rebuilt from the rows.
	sels map[selKey][2]*coreset.Selection
}

type selKey struct {
	selector string
	m        int
	seed     uint64
	rule     PivotRule
}

// selection returns SelectViews(ctx, s.train, selector, m, seed, rule), selecting only
// the first time.
func (s *fitSplit) selection(ctx context.Context, selector string, m int, seed uint64, rule PivotRule) (*ViewSelection, error) {
	k := selKey{selector, m, seed, rule}
	if ab, ok := s.sels[k]; ok {
		return viewLandmarks(s.train, ab[0], ab[1]), nil
	}
	vs, err := SelectViews(ctx, s.train, selector, m, seed, rule)
	if err != nil {
		return nil, err
	}
	if s.sels == nil {
		s.sels = map[selKey][2]*coreset.Selection{}
	}
	s.sels[k] = [2]*coreset.Selection{vs.A, vs.B}
	return vs, nil
}

// BlockCache keeps the last split of Blocks, so that a sequence of fits on the same data
// and pipeline settings (cairnctl reproduce's tables) computes the training rows'
// features once. It holds one split at a time: a new key drops the old split before the
// new one is built, bounding the memory to one data set's features. A nil cache keeps
// nothing; the zero value is an empty cache. It is not safe for concurrent use.
type BlockCache struct {
	key  Pipeline
	frac float64
	held *fitSplit
}

// SplitCache returns a cache that holds the split of the stored points sub (a
// SubsetPrepared with features) for fits under pf and valFrac: ValSplit of their ids,
// the training rows' features shared with sub. It refuses a split that leaves fewer than
// two training or validation rows.
func SplitCache(pf *Pipeline, valFrac float64, sub *Prepared) (*BlockCache, error) {
	trainRows, valRows := ValSplit(sub.Set.IDs, valFrac, pf.Seed)
	if len(trainRows) < 2 || len(valRows) < 2 {
		return nil, fmt.Errorf("%d points with --val-frac %v leave %d training and %d validation rows", sub.Set.N, valFrac, len(trainRows), len(valRows))
	}
	key := *pf
	key.M = 0
	sub.Seconds = map[string]float64{}
	return &BlockCache{key: key, frac: valFrac, held: &fitSplit{all: sub, train: SubsetPrepared(sub, trainRows), val: valRows}}, nil
}

// Drop forgets the cached split (a nil cache holds none).
func (c *BlockCache) Drop() {
	if c != nil {
		c.held = nil
	}
}

// split returns the fitSplit of pf and valFrac (from the cache when it holds it) and
// the phase times of building it (none on a cache hit).
func (c *BlockCache) split(pf *Pipeline, valFrac float64) (*fitSplit, map[string]float64, error) {
	key := *pf
	key.M = 0 // the budget is the selector's, not the split's
	phases := map[string]float64{}
	if c != nil && c.held != nil && c.key == key && c.frac == valFrac {
		return c.held, phases, nil
	}
	c.Drop()
	prep, err := Load(pf)
	if err != nil {
		return nil, nil, err
	}
	set := prep.Set
	if set.Labels == nil {
		return nil, nil, fmt.Errorf("--data %q: no labels; fit selects checkpoints by validation accuracy", pf.Data)
	}
	trainRows, valRows := ValSplit(set.IDs, valFrac, pf.Seed)
	if len(trainRows) < 2 || len(valRows) < 2 {
		return nil, nil, fmt.Errorf("--n %d with --val-frac %v leaves %d training and %d validation rows", set.N, valFrac, len(trainRows), len(valRows))
	}
	tr := SubsetPrepared(prep, trainRows)
	prep.ViewA, prep.ViewB = nil, nil // the training rows' views are tr's; nothing reads the rest
	tr.Seconds = map[string]float64{}
	tr.Featurize()
	maps.Copy(phases, prep.Seconds)
	maps.Copy(phases, tr.Seconds)
	s := &fitSplit{all: prep, train: tr, val: valRows}
	if c != nil {
		c.key, c.frac, c.held = key, valFrac, s
	}
	return s, phases, nil
}
