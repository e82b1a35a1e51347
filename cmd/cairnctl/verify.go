package main

import (
	"context"
	"flag"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/verify"
)

// verifySRHTCmd is `cairnctl verify srht` (verify.SRHT).
func verifySRHTCmd(fs *flag.FlagSet) cli.Func {
	var o verify.SRHTOptions
	fs.IntVar(&o.P, "P", 256, "vector length (zero-padded to a power of two)")
	fs.IntVar(&o.S, "s", 32, "SRHT width s, 1 ≤ s ≤ padded P")
	fs.IntVar(&o.Draws, "draws", 20000, "independent SRHT draws")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the vectors and the draws")
	return func(ctx context.Context, stdio cli.Stdio) error {
		return jsonOut(stdio)(verify.SRHT(o))
	}
}

// verifyTwoAxisCmd is `cairnctl verify two-axis` (verify.TwoAxis).
func verifyTwoAxisCmd(fs *flag.FlagSet) cli.Func {
	var o verify.TwoAxisOptions
	fs.StringVar(&o.Arch, "arch", "mlp:16-32-32-8", "backbone spec (default: d = 8, 1864 parameters as in the paper)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the backbone, the inputs and the sketches")
	fs.IntVar(&o.Draws, "draws", 96, "independent sketches per cell")
	hs := fs.String("h", "1,4,16", "head counts")
	ss := fs.String("s", "20,64,0", "SRHT widths (0: no sketch)")
	return func(ctx context.Context, stdio cli.Stdio) error {
		var err error
		if o.H, err = parseInts("h", *hs); err != nil {
			return err
		}
		if o.S, err = parseInts("s", *ss); err != nil {
			return err
		}
		return jsonOut(stdio)(verify.TwoAxis(o))
	}
}

// verifyCertificateCmd is `cairnctl verify certificate` (verify.Certificate).
func verifyCertificateCmd(fs *flag.FlagSet) cli.Func {
	var o verify.CertificateOptions
	fs.StringVar(&o.Arch, "arch", "mlp:8-32-16", "backbone spec (small: the exact kernel is computed per pair)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of backbone, landmarks, ω, queries and evaluation draws")
	fs.IntVar(&o.Queries, "queries", 1000, "queries, each with its own evaluation draw")
	fs.IntVar(&o.M, "m", 12, "landmarks")
	fs.IntVar(&o.K, "k", 5, "top-K")
	fs.Float64Var(&o.Delta, "delta", 0.05, "failure probability per query, split δ/m over landmarks")
	fs.IntVar(&o.H, "h", 256, "Gaussian heads of the evaluation draw")
	fs.IntVar(&o.S, "s", 512, "SRHT width of the evaluation draw (0: no sketch)")
	fs.StringVar(&o.Variance, "variance", certify.VarianceExact, "variance bound: exact (Prop. two-axis) or conservative (eq. conservative-variance)")
	fs.StringVar(&o.Omega.From, "omega", "real", "ω of the landmarks: real (a fit on --omega-data, cairnctl explain's recipe with --m ⌈m/2⌉ per view) | halving (synthetic, see --omega-ratio) | FILE (numbers, a JSON array, cairnctl fit output or a model export; the first m are used)")
	fs.StringVar(&o.Omega.Data, "omega-data", "mnist", "data set of the real fit (--omega real)")
	fs.IntVar(&o.Omega.N, "omega-n", 1000, "training rows of the real fit (--omega real)")
	fs.Float64Var(&o.Omega.Ratio, "omega-ratio", 2, "--omega halving: ω = ratio^{-rank}·U(0.9,1.1) over a seeded random ranking")
	return func(ctx context.Context, stdio cli.Stdio) error {
		return jsonOut(stdio)(verify.Certificate(ctx, o))
	}
}

// verifyProductRuleCmd is `cairnctl verify product-rule` (verify.ProductRule).
func verifyProductRuleCmd(fs *flag.FlagSet) cli.Func {
	var o verify.ProductOptions
	fs.StringVar(&o.Arch, "arch", "mlp:16-32-32-8", "backbone spec (default: d = 8, 1864 parameters as in the paper)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of backbone, inputs, ω̄ and all draws")
	fs.IntVar(&o.Landmarks, "landmarks", 12, "landmarks")
	fs.IntVar(&o.Realizations, "realizations", 64, "independent (sketch, Ω) realizations")
	fs.IntVar(&o.H, "h", 4, "Gaussian heads of the evaluation draw")
	fs.IntVar(&o.S, "s", 64, "SRHT width of the evaluation draw (0: no sketch)")
	fs.Float64Var(&o.OmegaCV, "omega-cv", 0.15, "coefficient of variation of Ω_ℓ")
	return func(ctx context.Context, stdio cli.Stdio) error {
		return jsonOut(stdio)(verify.ProductRule(o))
	}
}
