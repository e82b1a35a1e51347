package study

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/lab/validate"
)

// RetrainDeletionStream names the draw of the random deletion sets of the retraining
// deletion test: validate.RandomSets under rng.Seed(--seed, RetrainDeletionStream).
const RetrainDeletionStream = "cairnctl/validate/retrain-deletion"

// retrainDeletion is step 6, the deletion test against the network itself: for each of
// the first --retrain-deletion-queries queries and each ranking of
// --retrain-deletion-rankings, the ranking's top --retrain-deletion-k stored points are
// left out of the served backbone's training (entk.TrainOptions.Leave: the same seed,
// and every other point in the minibatches and steps it had) and the drop of the
// query's correct-class margin is ranked among the drops of --retrain-deletion-random
// random sets of as many stored points, left out the same way (shared by every ranking
// and query); with --retrain-deletion-retrains R, each margin is the mean over R networks
// (marginsWithout), so a drop is the deletion's expected effect over training seeds. It
// returns, per ranking, the median over queries of the strict percentile
// (certify.Percentile) and of the mid-rank one (validate.MidrankPercentile); nil when
// the test is off (no queries).
func (v *validation) retrainDeletion(ctx context.Context, sc *scores) (map[string][2]float64, error) {
	o := v.o
	nq, n := min(o.RetrainDeletionQueries, v.qs.N), v.all.Set.N
	if nq == 0 {
		return nil, nil
	}
	t0 := time.Now()
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	sets, err := validate.RandomSets(rng.Seed(v.mo.Pipeline.Seed, RetrainDeletionStream), rows, o.RetrainDeletionK, o.RetrainDeletionRandom)
	if err != nil {
		return nil, fmt.Errorf("--retrain-deletion-k %d: %w", o.RetrainDeletionK, err)
	}
	margins := map[string][]float64{} // sorted set → the queries' margins without it
	trained := 0
	without := func(set []int) ([]float64, error) {
		key := fmt.Sprint(slices.Sorted(slices.Values(set)))
		if m, ok := margins[key]; ok {
			return m, nil
		}
		m, err := v.marginsWithout(ctx, set, nq)
		if err != nil {
			return nil, err
		}
		margins[key] = m
		if trained++; trained%10 == 0 {
			v.logf("retraining deletion: %d sets", trained)
		}
		return m, nil
	}
	base, err := without(nil)
	if err != nil {
		return nil, err
	}
	random := make([][]float64, nq) // random[t][s]: query t's margin drop without set s
	for t := range random {
		random[t] = make([]float64, len(sets))
	}
	for s, set := range sets {
		m, err := without(set)
		if err != nil {
			return nil, err
		}
		for t := range nq {
			random[t][s] = base[t] - m[t]
		}
	}
	out := map[string][2]float64{}
	for _, name := range o.RetrainDeletionRankings {
		pts := sc.points[name]
		per, mid := make([]float64, nq), make([]float64, nq)
		for t := range nq {
			m, err := without(certify.TopKIndices(pts[t], o.RetrainDeletionK))
			if err != nil {
				return nil, err
			}
			drop := base[t] - m[t]
			if per[t], err = certify.Percentile(drop, random[t]); err != nil {
				return nil, fmt.Errorf("retraining deletion, %s, query %d: %w", name, t, err)
			}
			mid[t] = validate.MidrankPercentile(drop, random[t])
		}
		out[name] = [2]float64{validate.Median(per), validate.Median(mid)}
	}
	v.secs["retrain_deletion"] = time.Since(t0).Seconds()
	v.secs["retrain_deletion_networks"] = float64(trained * o.RetrainDeletionRetrains)
	v.logf("retraining deletion: %d sets × %d networks (%d random sets of %d points) in %.1fs", trained, o.RetrainDeletionRetrains, len(sets), o.RetrainDeletionK, v.secs["retrain_deletion"])
	return out, nil
}

// marginsWithout trains the network again --retrain-deletion-retrains times, network r
// from the seeded initialization and options of retrainSeed(r) (the first the served
// backbone's), each leaving the stored points set out (TrainOptions.Leave), and returns
// the first nq queries' correct-class margins averaged over the networks.
func (v *validation) marginsWithout(ctx context.Context, set []int, nq int) ([]float64, error) {
	all, arch, nr := v.all.Set, v.mo.Pipeline.Arch, v.o.RetrainDeletionRetrains
	leave := make([]bool, all.N)
	for _, i := range set {
		leave[i] = true
	}
	m := make([]float64, nq)
	for r := range nr {
		seed := v.o.retrainSeed(r)
		b0, err := entk.NewBackbone(arch, seed)
		if err != nil {
			return nil, err
		}
		opt := v.o.trainOptions(seed)
		opt.Leave = leave
		params, err := entk.Train(ctx, b0, all.X[:all.N*all.D], all.Labels, opt)
		if err != nil {
			return nil, fmt.Errorf("retraining without %d points, network %d: %w", len(set), r, err)
		}
		net, err := entk.FromParams(arch, params)
		if err != nil {
			return nil, err
		}
		out, ws := make([]float64, net.OutDim()), net.NewWorkspace()
		for t := range nq {
			net.Forward(out, v.qs.Row(t), ws)
			m[t] += margin(out, v.qs.Labels[t]) / float64(nr)
		}
	}
	return m, nil
}

// ParseRetrainDeletionRankings reads --retrain-deletion-rankings: comma-separated
// names of rankings and baselines the study scores (validate.Rankings, MarginRows,
// Baselines, "gradient" and "gradient_cosine").
func ParseRetrainDeletionRankings(s string) ([]string, error) {
	known := slices.Concat(validate.Rankings, validate.MarginRows, validate.Baselines, []string{validate.Gradient, validate.GradientCosine})
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("--retrain-deletion-rankings: %q is not one of %s", name, strings.Join(known, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}
