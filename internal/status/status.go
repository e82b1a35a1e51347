// Package status holds the daemon's state as /status reports it (Report) and the
// served backbone's description, coverage and start-up log lines, so that the daemon
// only fills them in.
package status

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/erasure"
	"github.com/cairnhq/cairn/internal/featsource"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

// LabelCount is one label's share of the stored points and of the served pool's
// landmarks (both views: a point that is a landmark of both counts twice).
type LabelCount struct {
	Points    int `json:"points"`
	Landmarks int `json:"landmarks"`
}

// Report is the daemon's state as /status and `cairnctl status` show it.
type Report struct {
	Ready bool `json:"ready"`
	// Role is the configured role; Leading says whether the daemon is the deployment's
	// writer now (a primary, or a standby that took over).
	Role    string `json:"role"`
	Leading bool   `json:"leading"`
	// Points is the number of stored training points; Landmarks the served pool size.
	Points    int `json:"points"`
	Landmarks int `json:"landmarks"`
	// Model is the serving model version (0: none yet), ModelID its content hash, and
	// ModelPoints the number of points it was fitted on.
	Model       uint64 `json:"model"`
	ModelID     string `json:"model_id"`
	ModelPoints int    `json:"model_points"`
	// VarianceModel is what the serving model's answers use (exact_kernel, or conservative
	// on the sketched evaluation draw) and ExactRows, on the exact path, where its rows are
	// held ("memory", or "disk": query.exact_disk_bytes). Absent before the first model.
	VarianceModel string `json:"variance_model,omitempty"`
	ExactRows     string `json:"exact_rows,omitempty"`
	// GradientRows is how many stored points the serving model's gradient ranking (the
	// default, "gradient") ranks, unmasked; GradientRowsError why it has none (no labels,
	// over query.gradient_memory_bytes, a replica), in which case default answers use entk.
	GradientRows      int    `json:"gradient_rows"`
	GradientRowsError string `json:"gradient_rows_error,omitempty"`
	// Masked are the serving model's landmarks removed since its fit (deleted points).
	Masked int `json:"masked"`
	// Residual is the pool's residual certificate per view (A, B); Stale says whether
	// a view's landmarks may differ from batch greedy until the next sync.
	Residual [2]certify.Residual `json:"residual"`
	Stale    [2]bool             `json:"stale"`
	// Refits counts completed refits since start; RefitRunning says one is in progress.
	Refits       uint64 `json:"refits"`
	RefitRunning bool   `json:"refit_running"`
	// RefitSeconds is the wall time of the last completed refit (snapshot to install);
	// RefitPhases its phases' seconds, as its "model installed" log line gives them
	// (sync, blocks, init, fit, reseed, serving, and reseed_beside: the reseed
	// measurement's own time beside the fits). Absent before the first refit.
	RefitSeconds float64            `json:"refit_seconds"`
	RefitPhases  map[string]float64 `json:"refit_phase_seconds,omitempty"`
	// PendingDeletions are deletions applied whose audit has not been emitted yet.
	PendingDeletions int `json:"pending_deletions"`
	// Queries counts answered queries since start.
	Queries uint64       `json:"queries"`
	Ingest  ingest.Stats `json:"ingest"`
	// Features is what the primary's reader of the featurizers' records did
	// (ingest.featurizers on; absent otherwise): "stale" records came for events already
	// applied, rows computed twice.
	Features *featsource.Stats `json:"features,omitempty"`
	// Lag is, per "topic/partition", the messages not yet applied.
	Lag map[string]int64 `json:"lag"`
	// Labels counts, per label of the stored points, the points and the pool's
	// landmarks, so that a class the pool leaves out shows (absent without labels).
	Labels map[string]LabelCount `json:"labels,omitempty"`
	// Backbone is the served network and its parameter coverage.
	Backbone *Backbone `json:"backbone"`
	// Erasures are the data subjects' requests awaiting their audit and the last erasure
	// whose audit was published (internal/erasure).
	Erasures *erasure.Status `json:"erasures,omitempty"`
}

// Backbone is the served backbone as /status shows it: its architecture spec
// ("onnx:<SHA-256 of the file>" for an ONNX model), where its parameters come from
// (weights.Source: "shipped:NAME", a file, or "seeded:<seed>", and the SHA-256 of its
// bytes), the per-example input shape, and how much of it the kernel covers.
type Backbone struct {
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

// BackboneOf describes f's backbone.
func BackboneOf(f *pipeline.Features) *Backbone {
	c, src := f.Coverage(), f.Source()
	st := &Backbone{Arch: f.Backbone().Arch(), Weights: src.Weights, WeightsSHA256: src.SHA256,
		InputShape: f.InputShape(), ParamsInKernel: c.KernelParams, ParamsTotal: c.ModelParams, Share: c.Share()}
	for _, w := range c.Warnings {
		st.Warnings = append(st.Warnings, w.String())
	}
	return st
}

// AnswerCoverage is the coverage every answer states (stream.Attribution.Coverage).
func AnswerCoverage(f *pipeline.Features) *stream.Coverage {
	c := f.Coverage()
	return &stream.Coverage{ParamsInKernel: c.KernelParams, ParamsTotal: c.ModelParams, Share: c.Share()}
}

// UIBackbone is the overview's backbone line: its spec (with the file for an ONNX model)
// and coverage.
func UIBackbone(b *Backbone) (string, ui.BackboneCoverage) {
	name := b.Arch
	if strings.HasPrefix(name, "onnx:") && b.Weights != "" {
		name += " (" + b.Weights + ")"
	}
	return name, ui.BackboneCoverage{KernelParams: b.ParamsInKernel, ModelParams: b.ParamsTotal, Share: b.Share, Warnings: b.Warnings}
}

// LogBackbone logs the backbone the daemon serves under cfg, then each of the ONNX
// loader's warnings about the export (folded BatchNorm, initializers shared through
// Identity nodes, parameters no output depends on) with the export call that avoids it,
// and whether the pool's exact eNTK rows fit query.exact_memory_bytes (logExactRows).
func LogBackbone(log zerolog.Logger, f *pipeline.Features, cfg config.Config) {
	b := BackboneOf(f)
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
// where the backbone has them) against query.exact_memory_bytes, then
// query.exact_disk_bytes (rows in a mapped file, serving.Disk), with a warning when they
// fit neither: answers then use the sketched evaluation draw, which certifies far fewer
// (a large network, such as most ONNX models, meets this first). Nothing is said under a
// d_eff budget (the pool's size is not known before its data).
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
	if need <= cfg.Query.ExactDiskBytes {
		log.Info().Int64("exact_rows_bytes", need).Int64("exact_disk_bytes", cfg.Query.ExactDiskBytes).
			Msg("exact eNTK rows exceed query.exact_memory_bytes and go to a mapped file: answers use the exact kernel (exact_rows disk)")
		return
	}
	log.Warn().Int64("exact_rows_bytes", need).Int64("exact_memory_bytes", cfg.Query.ExactMemoryBytes).
		Int64("exact_disk_bytes", cfg.Query.ExactDiskBytes).
		Msg(fmt.Sprintf("the exact eNTK rows of %d landmarks need %d MiB, over query.exact_memory_bytes and query.exact_disk_bytes: "+
			"answers use the sketched evaluation draw (variance_model conservative), which certifies far fewer; set "+
			"query.exact_memory_bytes or query.exact_disk_bytes to at least %d for exact answers, or select fewer parameters "+
			"(model.params)", m, need>>20, need))
}
