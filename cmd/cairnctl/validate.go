package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/validate"
	"github.com/cairnhq/cairn/internal/lab/validate/study"
)

// validateCmd is `cairnctl validate`: cairn's rankings against retraining (study.Run),
// or the report of an earlier run (--from), as JSON or Markdown. Its flags are the model
// flags of fit and explain (--n defaulting to 2000 stored points) and the study's own.
func validateCmd(fs *flag.FlagSet) cli.Func {
	var mf modelFlags
	var o study.Options
	mf.register(fs)
	mf.pipeline.n = 2000
	n := fs.Lookup("n")
	n.DefValue, n.Usage = "2000", "stored points: the first n rows of the training split"
	fs.IntVar(&o.Queries, "queries", 100, "test queries: the first rows of the test split")
	fs.IntVar(&o.Halves, "halves", 50, "seeded random halves of the stored points to retrain and refit on")
	fs.IntVar(&o.Retrains, "retrains", 1, "networks trained per half, from seeds --seed and then streams cairnctl/validate/retrain/<r>; the network target is their mean margin")
	fs.IntVar(&o.TrainEpochs, "train-epochs", 15, "backbone training epochs (cairnctl train's default)")
	fs.IntVar(&o.TrainBatch, "train-batch", 64, "backbone training minibatch (cairnctl train's default)")
	fs.Float64Var(&o.TrainLR, "train-lr", 2e-3, "backbone training Adam step size (cairnctl train's default)")
	fs.IntVar(&o.Random, "random", 30, "random landmark-point removals per deletion test (paper appendix D's N)")
	fs.Float64Var(&o.TrakRidge, "trak-ridge", 1e-3, "TRAK ridge λ as a multiple of the mean squared norm of a feature row")
	fs.IntVar(&o.RetrainDeletionQueries, "retrain-deletion-queries", 30, "the deletion test against retraining: the first queries it tests (0: off)")
	fs.IntVar(&o.RetrainDeletionK, "retrain-deletion-k", 1, "the deletion test against retraining: the top points of a ranking left out of the network's training")
	fs.IntVar(&o.RetrainDeletionRetrains, "retrain-deletion-retrains", 1, "the deletion test against retraining: networks per set, from seeds --seed and then streams cairnctl/validate/retrain/<r>; a drop is their mean")
	fs.IntVar(&o.RetrainDeletionRandom, "retrain-deletion-random", 20, "the deletion test against retraining: random sets of as many points, left out the same way")
	rdel := fs.String("retrain-deletion-rankings", "gradient_cosine,gradient,trak", "the deletion test against retraining: the rankings and baselines it tests, comma-separated")
	format := fs.String("format", "json", "output: json | markdown")
	from := fs.String("from", "", "print the report of an earlier run (its JSON output) in --format instead of running")
	return func(ctx context.Context, stdio cli.Stdio) error {
		o.Model = mf.options()
		var errs []error
		if *format != "json" && *format != "markdown" {
			errs = append(errs, fmt.Errorf("--format %q: want json or markdown", *format))
		}
		if *from == "" {
			var err error
			o.RetrainDeletionRankings, err = study.ParseRetrainDeletionRankings(*rdel)
			errs = append(errs, err, o.Check())
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		var rep *validate.Report
		var err error
		if *from != "" {
			rep, err = study.ReadReport(*from)
		} else {
			rep, err = study.Run(ctx, &o, stdio.Err)
		}
		if err != nil {
			return err
		}
		if *format == "markdown" {
			return rep.WriteMarkdown(stdio.Out)
		}
		return writeJSON(stdio.Out, rep)
	}
}
