package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/offline"
)

// modelInspectCmd is `cairnctl model inspect FILE.onnx [--params GLOB,...]`: what cairn
// sees in an ONNX export (offline.Inspection): its operators and opset, the per-example
// input shape, every float initializer with whether it is a parameter and in the kernel
// under --params, the coverage, the inputs read as embedding codes, the loader's
// warnings with the export call that avoids them, and whether cairnd --model would
// serve it. A file that does not load prints what could be read with "error" and exits
// 1 with what to change.
func modelInspectCmd(fs *flag.FlagSet) cli.Func {
	var of onnxFlags
	fs.StringVar(&of.params, "params", "", "comma-separated initializer-name globs selecting the kernel's parameters, as cairnd --params (model.params); default: all")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if fs.NArg() != 1 {
			return fmt.Errorf("want one ONNX file (cairnctl model inspect FILE.onnx [--params GLOB,...]), got %d arguments", fs.NArg())
		}
		r, err := offline.Inspect(fs.Arg(0), of.globs())
		if r != nil {
			err = errors.Join(writeJSON(stdio.Out, r), err)
		}
		return err
	}
}

// onnxFlags are --model FILE.onnx and --params GLOB,... of the commands that take an
// ONNX backbone: the daemon's model.file and model.params.
type onnxFlags struct {
	model  string
	params string
}

// register adds --model and --params to fs.
func (f *onnxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "an ONNX export (FILE.onnx) as the backbone instead of --arch, as cairnd --model (model.file); cairnctl model inspect FILE.onnx shows what cairn sees in it")
	fs.StringVar(&f.params, "params", "", "with --model: comma-separated initializer-name globs selecting the kernel's parameters, e.g. 'layer3.*,fc.*' (model.params); default: all")
}

// globs is --params as a list (nil when empty).
func (f *onnxFlags) globs() []string { return offline.GlobList(f.params) }

// apply sets model.file and model.params of m from the flags, when --model is given
// (model.arch then left empty unless it pins the file's digest); --params alone, and
// --model beside weights or the untrained network, are errors.
func (f *onnxFlags) apply(m *config.Backbone) error {
	switch {
	case f.model == "" && f.params != "":
		return errors.New("--params selects an ONNX model's parameters: give --model FILE.onnx too")
	case f.model == "":
		return nil
	case m.Weights != "" || m.Untrained:
		return fmt.Errorf("--model %s holds the weights: drop --weights (%q) and --untrained (%v)", f.model, m.Weights, m.Untrained)
	}
	m.File, m.Params = f.model, f.globs()
	if !strings.HasPrefix(m.Arch, "onnx") {
		m.Arch = ""
	}
	return nil
}
