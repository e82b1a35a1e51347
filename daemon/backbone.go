package daemon

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

// BackboneStatus is the served backbone as /status shows it: its architecture spec
// ("onnx:<SHA-256 of the file>" for an ONNX model), where its parameters come from
// (weights.Source: "shipped:NAME", a file, or "seeded:<seed>", and the SHA-256 of its
// bytes), the per-example input shape, and how much of it the kernel covers.
type BackboneStatus struct {
	Arch          string `json:"arch"`
	Weights       string `json:"weights"`
	WeightsSHA256 string `json:"weights_sha256"`
	InputShape    []int  `json:"input_shape"`
	// ParamsInKernel of ParamsTotal parameters are differentiated (Share; 1 for a
	// built-in backbone, or an ONNX model without model.params); Warnings are the ONNX
	// loader's findings about the export, each with its fix.
	ParamsInKernel int      `json:"params_in_kernel"`
	ParamsTotal    int      `json:"params_total"`
	Share          float64  `json:"share"`
	Warnings       []string `json:"warnings,omitempty"`
}

// backboneStatus describes f's backbone.
func backboneStatus(f *pipeline.Features) *BackboneStatus {
	c, src := f.Coverage(), f.Source()
	st := &BackboneStatus{Arch: f.Backbone().Arch(), Weights: src.Weights, WeightsSHA256: src.SHA256,
		InputShape: f.InputShape(), ParamsInKernel: c.KernelParams, ParamsTotal: c.ModelParams, Share: c.Share()}
	for _, w := range c.Warnings {
		st.Warnings = append(st.Warnings, w.String())
	}
	return st
}

// answerCoverage is the coverage every answer states (stream.Attribution.Coverage).
func answerCoverage(f *pipeline.Features) *stream.Coverage {
	c := f.Coverage()
	return &stream.Coverage{ParamsInKernel: c.KernelParams, ParamsTotal: c.ModelParams, Share: c.Share()}
}

// uiBackbone is the overview's backbone line: its spec (with the file for an ONNX model)
// and coverage.
func uiBackbone(b *BackboneStatus) (string, ui.BackboneCoverage) {
	name := b.Arch
	if strings.HasPrefix(name, "onnx:") && b.Weights != "" {
		name += " (" + b.Weights + ")"
	}
	return name, ui.BackboneCoverage{KernelParams: b.ParamsInKernel, ModelParams: b.ParamsTotal, Share: b.Share, Warnings: b.Warnings}
}

// logBackbone logs the backbone the daemon serves under cfg, then each of the ONNX
// loader's warnings about the export (folded BatchNorm, initializers shared through
// Identity nodes, parameters no output depends on) with the export call that avoids it,
// and whether the pool's exact eNTK rows fit query.exact_memory_bytes (logExactRows).
func logBackbone(log zerolog.Logger, f *pipeline.Features, cfg config.Config) {
	b := backboneStatus(f)
	log.Info().Str("arch", b.Arch).Str("weights", b.Weights).Str("weights_sha256", b.WeightsSHA256).
		Ints("input_shape", b.InputShape).Int("params_in_kernel", b.ParamsInKernel).Int("params_total", b.ParamsTotal).
		Float64("share", b.Share).Int("index_inputs", len(f.IndexInputs())).Msg("backbone")
	for _, w := range f.Coverage().Warnings {
		log.Warn().Str("kind", string(w.Kind)).Strs("tensors", w.Tensors).Str("fix", w.Fix).Msg("backbone export: " + w.Message)
	}
	logExactRows(log, f.Backbone(), cfg)
}

// logExactRows says, for a pool of pool.m landmarks per view, how many bytes the exact
// eNTK rows of its 2m landmarks take (serving.NewExactRows: full rows, or factored ones
// where the backbone has them) against query.exact_memory_bytes, with a warning when
// they do not fit: answers then use the sketched evaluation draw, which certifies far
// fewer (a large network, such as most ONNX models, meets this first). Nothing is said
// under a d_eff budget (the pool's size is not known before its data).
func logExactRows(log zerolog.Logger, b entk.Backbone, cfg config.Config) {
	if cfg.Pool.Budget != "" || cfg.Query.ExactMemoryBytes <= 0 {
		return
	}
	m := int64(2 * cfg.Pool.M)
	need := m * int64(entk.ExactDim(b)) * 4
	if fac, ok := entk.NewFactored(b); ok {
		need = min(need, m*int64(fac.Dim())*4)
	}
	if need <= cfg.Query.ExactMemoryBytes {
		log.Info().Int64("exact_rows_bytes", need).Int64("exact_memory_bytes", cfg.Query.ExactMemoryBytes).
			Msg("exact eNTK rows fit: answers use the exact kernel")
		return
	}
	log.Warn().Int64("exact_rows_bytes", need).Int64("exact_memory_bytes", cfg.Query.ExactMemoryBytes).
		Msg(fmt.Sprintf("the exact eNTK rows of %d landmarks need %d MiB, over query.exact_memory_bytes: answers use the sketched "+
			"evaluation draw (variance_model conservative), which certifies far fewer; set query.exact_memory_bytes to at least %d "+
			"for exact answers, or select fewer parameters (model.params)", m, need>>20, need))
}
