package pipeline

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/fit"
)

// problem is a small fit problem whose blocks are a Gram matrix of random features, so
// that K_mm is positive definite as the PCI initializer needs.
func problem(seed uint64, n, m, q int) *fit.Problem {
	r := rand.New(rand.NewPCG(seed, 1))
	g := func(rows int) *mat.Dense {
		d := mat.NewDense(rows, q, nil)
		for i := range rows {
			for j := range q {
				d.Set(i, j, r.NormFloat64())
			}
		}
		return d
	}
	z := g(m)
	ka, kb, kmm := mat.NewDense(n, m, nil), mat.NewDense(n, m, nil), mat.NewDense(m, m, nil)
	xa := g(n)
	xb := mat.DenseCopyOf(xa)
	for i := range n {
		for j := range q {
			xb.Set(i, j, xb.At(i, j)+0.1*r.NormFloat64())
		}
	}
	ka.Mul(xa, z.T())
	kb.Mul(xb, z.T())
	kmm.Mul(z, z.T())
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id(i)
	}
	return &fit.Problem{KA: ka, KB: kb, Kmm: kmm, IDs: ids}
}

// TestRecipeRunIsTheSequence: Run gives, bit for bit, what the plain sequence of fit
// calls gives (ScaleKernels, Initialize, ScaleInit, RepeatContext), so moving the recipe
// here changed no number.
func TestRecipeRunIsTheSequence(t *testing.T) {
	c := config.Default().Fit
	c.K, c.Epochs, c.Batch, c.Fits = 4, 3, 16, 2
	rec, err := RecipeOf(c)
	if err != nil {
		t.Fatal(err)
	}
	const seed = 11
	got, err := rec.Run(t.Context(), problem(3, 40, 12, 20), seed)
	if err != nil {
		t.Fatal(err)
	}

	p := problem(3, 40, 12, 20)
	scale, err := fit.ScaleKernels(p, fit.ScaleDiag)
	if err != nil {
		t.Fatal(err)
	}
	ir, err := fit.Initialize(fit.PCI, p, c.K, seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fit.ScaleInit(fit.DefaultInitScale, fit.PCI, p.KA, ir.A0); err != nil {
		t.Fatal(err)
	}
	opt := fit.DefaultOptions(fit.SimCLR)
	opt.Seed, opt.Epochs, opt.Patience, opt.BatchSize = seed, c.Epochs, c.Patience, c.Batch
	opt.LR, opt.WeightDecay = c.LearningRate, c.WeightDecay
	want, err := fit.RepeatContext(t.Context(), p, ir, opt, c.Fits, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.KernelScale != scale {
		t.Errorf("kernel scale: got %v, want %v", got.KernelScale, scale)
	}
	if len(got.Fits.Fits) != len(want.Fits) {
		t.Fatalf("fits: got %d, want %d", len(got.Fits.Fits), len(want.Fits))
	}
	for r := range want.Fits {
		ga, wa := got.Fits.Fits[r].A.RawMatrix().Data, want.Fits[r].A.RawMatrix().Data
		for i := range wa {
			if math.Float64bits(ga[i]) != math.Float64bits(wa[i]) {
				t.Fatalf("fit %d: Ã[%d] got %v, want %v", r, i, ga[i], wa[i])
			}
		}
	}
	for _, k := range []string{"kernel", "init", "fit"} {
		if _, ok := got.Seconds[k]; !ok {
			t.Errorf("Seconds has no %q: %v", k, got.Seconds)
		}
	}
}

// TestRecipeValidate: every bad field is reported at once, named, and wraps ErrConfig;
// names that do not parse are refused by RecipeOf.
func TestRecipeValidate(t *testing.T) {
	rec, err := RecipeOf(config.Default().Fit)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Validate(); err != nil {
		t.Fatalf("default recipe: %v", err)
	}
	rec.K, rec.Fits, rec.Workers, rec.Options.Epochs, rec.InitScale = 0, 0, -1, 0, "bogus"
	err = rec.Validate()
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	for _, want := range []string{"k = 0", "fits = 0", "workers = -1", "Epochs = 0", "InitScale"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := rec.Start(problem(1, 8, 4, 6), 1); !errors.Is(err, ErrConfig) {
		t.Errorf("Start with a bad recipe: %v, want ErrConfig", err)
	}
	for _, c := range []struct{ loss, init, want string }{{"nope", "pci", "fit.loss"}, {"bt", "nope", "fit.init"}} {
		f := config.Default().Fit
		f.Loss, f.Init = c.loss, c.init
		if _, err := RecipeOf(f); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RecipeOf(loss %q, init %q): %v, want ErrConfig naming %s", c.loss, c.init, err, c.want)
		}
	}
}
