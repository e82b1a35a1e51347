package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/identify"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// auditCmd is `cairnctl audit` (identify.Table): fit the model once per seed (fits differing only in the
// fit seed), then for each ranking (displacement ||A−A_0||, contribution, leave-one-out,
// and Latent-Space Reselection, certify.ReselectionTo)
// measure the deletion effect of its top-K landmarks against --random random K-sets (the
// same sets for every ranking), on the validation split as the labelled reference and the
// test split as queries. With --top1 it measures the per-query form instead
// (identify.Top1Study): each query's top-1 landmark under entk and its variations, the
// deletion test the daemon's audits run, on one fit.
func auditCmd(fs *flag.FlagSet) cli.Func {
	var mf modelFlags
	mf.register(fs)
	k := fs.Int("k", 10, "size K of the deleted top sets")
	random := fs.Int("random", 30, "number N of random deletion sets")
	seeds := fs.Int("seeds", 3, "number of fit seeds")
	testN := fs.Int("test-n", 500, "rows of the test split used as queries")
	top1 := fs.Bool("top1", false, "per-query top-1 deletion test of entk and its variations (one fit; the test rows' first half is the audit set, the second half the queries)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *k < 1 || *random < 1 || *seeds < 1 || *testN < 1 {
			return fmt.Errorf("--k %d, --random %d, --seeds %d, --test-n %d: each must be ≥ 1", *k, *random, *seeds, *testN)
		}
		o := mf.options()
		if *top1 {
			*seeds = 1
		}
		fm, err := offline.FitModel(ctx, &o, *seeds, *testN)
		if err != nil {
			return err
		}
		if *top1 {
			rep, err := identify.Top1Study(fm, mf.pipeline.data)
			if err != nil {
				return err
			}
			return writeJSON(stdio.Out, rep)
		}
		rep, err := identify.Table(fm, mf.pipeline.data, *k, *random, mf.pipeline.seed)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, rep)
	}
}
