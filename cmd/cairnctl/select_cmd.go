package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// selectCmd is `cairnctl select`: landmark selection per view, the budget curve, d_eff
// and class coverage (offline.Select).
func selectCmd(fs *flag.FlagSet) cli.Func {
	var pf pipelineFlags
	var o offline.SelectOptions
	pf.register(fs)
	fs.StringVar(&o.Features, "features", "", "CSV of feature vectors, one per row (linear kernel); replaces --data")
	fs.StringVar(&o.Budget, "budget", "", "budget rule: an integer m, or deff:λ for m = ⌈d_eff(λ)⌉ (overrides --m)")
	fs.StringVar(&o.Selector, "selector", coreset.SelPCNTK, fmt.Sprintf("selector: one of %v", coreset.Selectors))
	fs.Float64Var(&o.Lambda, "lambda", 0, "ridge λ > 0: report d_eff(λ) (exact when n ≤ 5000, and SLQ); also the leverage selector's ridge (default tr K/m)")
	fs.IntVar(&o.Views, "views", 2, "number of augmented views to select on (1 or 2; --features has 1)")
	slq := coreset.SLQOptions{}.WithDefaults()
	fs.IntVar(&o.SLQ.Probes, "slq-probes", slq.Probes, "most SLQ probe vectors (SLQ stops earlier once its standard error is 0.2% of d_eff)")
	fs.IntVar(&o.SLQ.Steps, "slq-steps", slq.Steps, "most Lanczos steps per SLQ quadratic form (each stops earlier once its Gauss–Radau bracket closes)")
	fs.IntVar(&o.SLQ.Deflate, "slq-deflate", slq.Deflate, "SLQ deflation rank (negative: none)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		o.Pipeline = pf.options()
		return jsonOut(stdio)(offline.Select(ctx, &o))
	}
}
