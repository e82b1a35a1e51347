// Package pipeline is the one feature pipeline and the one fit recipe of cairn, used by
// the daemon, by every cairnctl tool and by the benchmarks, so that what a tool reports
// is what the daemon computes.
//
// # Features
//
// Features (NewFeatures) turns a point's raw input into the fit-draw features ψ of its two
// augmented views: the frozen backbone resolved by entk/weights, or the ONNX model of
// model.file with its parameter selection (entk.OpenBackbone; Coverage says what the
// kernel covers, IndexInputs which inputs are embedding codes), the sketch drawn under
// the named stream FitSketch, and the seeded augmenter of dataset. It is immutable and
// safe for concurrent use; callers bring their own buffers, and every method documents
// which arguments it writes.
//
// # Fit recipe
//
// Recipe is paper Alg. cairn-stage2's fit as the daemon runs it: kernel scaling
// (fit.ScaleKernels), the initializer (fit.Initialize) and its scaling (fit.ScaleInit),
// then R Adam fits from seeds derived from one seed (fit.RepeatContext). Start does the
// first three, Run all four; a tool that runs another solver (KREPES) calls Start only.
// RecipeOf maps the daemon's config.Fit onto a Recipe, so the daemon's defaults are the
// tools' defaults. Both scale the problem's kernel blocks in place (documented on Start).
//
// The package does no I/O and keeps no global state.
package pipeline
