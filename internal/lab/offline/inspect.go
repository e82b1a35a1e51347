package offline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx"
	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
)

// Inspection is cairnctl model inspect's report on an ONNX file: what cairn sees in it
// and whether the daemon would serve it (model.file).
type Inspection struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Opset is the version of the default operator set the file imports; Ops counts the
	// graph's nodes per operator, as the file has them (constant subgraphs included).
	Opset int64          `json:"opset"`
	Ops   map[string]int `json:"ops"`
	// InputShape is one example's input shape (the batch dimension dropped): an event's
	// x is that tensor flattened row-major, InputDim values. OutputDim is d.
	InputShape []int `json:"input_shape"`
	InputDim   int   `json:"input_dim"`
	OutputDim  int   `json:"output_dim"`
	// Params lists every float initializer, parameter or not, with whether it is in the
	// kernel under the selection (--params) and its offset there; Coverage the totals.
	Params   []serving.ExportedTensor `json:"params"`
	Coverage InspectedCoverage        `json:"coverage"`
	// IndexInputs are the input positions read as table indices (embedding codes),
	// which the daemon requires to be integers in [0, n).
	IndexInputs []IndexInput `json:"index_inputs"`
	// FinalLinear says the exact eNTK rows factor out a final Linear in closed form
	// (entk's exact feature map); otherwise each exact row holds d·P values.
	FinalLinear bool `json:"final_linear"`
	// Warnings are the loader's findings about the export, each with the export call
	// that avoids it; ExportRecipe is that call.
	Warnings     []Warning `json:"warnings"`
	ExportRecipe string    `json:"export_recipe"`
	// Daemon is "accepts" when cairnd --model FILE --params … would serve the file, else
	// "refuses: " and why (a folded-BatchNorm export, unless model.allow_folded_batchnorm).
	Daemon string `json:"daemon"`
	// Error is why the file does not load (then only File, SHA256, Opset and Ops are set).
	Error string `json:"error,omitempty"`
}

// InspectedCoverage is the coverage of the kernel under the selection: parameters and
// tensors in the kernel against the model's, and the share of parameters.
type InspectedCoverage struct {
	ParamsInKernel  int     `json:"params_in_kernel"`
	ParamsTotal     int     `json:"params_total"`
	Share           float64 `json:"share"`
	TensorsInKernel int     `json:"tensors_in_kernel"`
	TensorsTotal    int     `json:"tensors_total"`
}

// Warning is one of the loader's findings about the export (onnx.Warning): its kind
// (folded-batchnorm, shared-initializer, unused-parameter), the initializers concerned,
// what it means for the kernel, and the export call that avoids it.
type Warning struct {
	Kind    string   `json:"kind"`
	Tensors []string `json:"tensors"`
	Message string   `json:"message"`
	Fix     string   `json:"fix"`
}

// IndexInput is one input position read as a table index (onnx.IndexInput).
type IndexInput struct {
	Pos  int    `json:"pos"`
	N    int    `json:"n"`
	Node string `json:"node"`
}

// Inspect loads the ONNX file at path with the kernel's parameters selected by the
// initializer-name globs params (nil: all) as the daemon would (entk/onnx, external
// data beside the file) and reports it. A file that does not load gives the report of
// what could be read (digest, opset, operators) with Error set, and the error with what
// to change (pipeline.LoadHint); a file that cannot be read gives only the error.
func Inspect(path string, params []string) (*Inspection, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	r := &Inspection{File: path, SHA256: hex.EncodeToString(sum[:]), Ops: map[string]int{}, ExportRecipe: onnx.ExportRecipe,
		Params: []serving.ExportedTensor{}, IndexInputs: []IndexInput{}, Warnings: []Warning{}}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &mp); err == nil {
		for _, n := range mp.GetGraph().GetNode() {
			r.Ops[n.GetOpType()]++
		}
		for _, o := range mp.GetOpsetImport() {
			if d := o.GetDomain(); d == "" || d == "ai.onnx" {
				r.Opset = o.GetVersion()
			}
		}
	}
	m, err := onnx.LoadBytes(raw, onnx.Options{Params: params, Dir: filepath.Dir(path)})
	if err != nil {
		err = fmt.Errorf("%s: %w%s", path, err, pipeline.LoadHint(err))
		r.Error, r.Daemon = err.Error(), "refuses: the file does not load"
		return r, err
	}
	cov := m.Coverage()
	r.InputShape, r.InputDim, r.OutputDim = m.InputShape(), m.InDim(), m.OutDim()
	r.Params = serving.CoverageOf(cov).Tensors
	r.Coverage = InspectedCoverage{ParamsInKernel: cov.KernelParams, ParamsTotal: cov.ModelParams, Share: cov.Share(),
		TensorsInKernel: cov.KernelTensors, TensorsTotal: cov.ModelTensors}
	for _, in := range m.IndexInputs() {
		r.IndexInputs = append(r.IndexInputs, IndexInput{Pos: in.Pos, N: in.N, Node: in.Node})
	}
	_, r.FinalLinear = m.FinalLinear()
	for _, w := range cov.Warnings {
		r.Warnings = append(r.Warnings, Warning{Kind: string(w.Kind), Tensors: w.Tensors, Message: w.Message, Fix: w.Fix})
	}
	r.Daemon = "accepts"
	if w := pipeline.FoldedBatchNorm(cov); w != nil {
		r.Daemon = "refuses: BatchNorm folded into the convolutions (re-export with export_recipe, or set model.allow_folded_batchnorm: true)"
	}
	return r, nil
}
