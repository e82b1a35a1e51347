package main

import (
	"context"
	"flag"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// explainCmd is `cairnctl explain`: fit R models on the data (the same pipeline as cairnctl
// fit), then certify the top-K landmarks for one test-split row under a fresh evaluation
// draw, with the fit floor when R > 1 (offline.ExplainQuery).
func explainCmd(fs *flag.FlagSet) cli.Func {
	var mf modelFlags
	mf.register(fs)
	query := fs.Int("query", 0, "row of the data set's test split to explain")
	k := fs.Int("k", 10, "top-K size")
	delta := fs.Float64("delta", 0.05, "failure probability δ of the certificate")
	fits := fs.Int("fits", 2, "R repeated fits for the fit floor (1: fixed-fit certificate only)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		o := mf.options()
		return jsonOut(stdio)(offline.ExplainQuery(ctx, &o, *query, *k, *delta, *fits))
	}
}
