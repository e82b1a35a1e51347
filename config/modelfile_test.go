package config

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestModelFileValidate: model.file excludes model.weights and model.untrained, leaves
// model.arch at its default or an onnx pin, and model.params and
// model.allow_folded_batchnorm need it.
func TestModelFileValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Backbone)
		paths  []string // nil = valid
	}{
		{"file", func(m *Backbone) { m.File = "m.onnx" }, nil},
		{"file with params", func(m *Backbone) { m.File, m.Params = "m.onnx", []string{"fc.*", "layer3.*"} }, nil},
		{"file without arch", func(m *Backbone) { m.File, m.Arch = "m.onnx", "" }, nil},
		{"file pinned", func(m *Backbone) { m.File, m.Arch = "m.onnx", "onnx:"+strings.Repeat("ab", 32) }, nil},
		{"file with folded batchnorm allowed", func(m *Backbone) { m.File, m.AllowFoldedBatchNorm = "m.onnx", true }, nil},
		{"file and weights", func(m *Backbone) { m.File, m.Weights = "m.onnx", "w.safetensors" }, []string{"model.weights"}},
		{"file and untrained", func(m *Backbone) { m.File, m.Untrained = "m.onnx", true }, []string{"model.untrained"}},
		{"file and a built-in arch", func(m *Backbone) { m.File, m.Arch = "m.onnx", "mlp:4-2" }, []string{"model.arch"}},
		{"bad glob", func(m *Backbone) { m.File, m.Params = "m.onnx", []string{"fc.[", ""} }, []string{"model.params"}},
		{"onnx arch without file", func(m *Backbone) { m.Arch = "onnx:" + strings.Repeat("ab", 32) }, []string{"model.arch"}},
		{"params without file", func(m *Backbone) { m.Params = []string{"fc.*"} }, []string{"model.params"}},
		{"folded batchnorm without file", func(m *Backbone) { m.AllowFoldedBatchNorm = true }, []string{"model.allow_folded_batchnorm"}},
	} {
		c := Default()
		tc.mutate(&c.Model)
		err := c.Validate()
		if tc.paths == nil {
			if err != nil {
				t.Errorf("%s: got %v, want valid", tc.name, err)
			}
			continue
		}
		for _, p := range tc.paths {
			if err == nil || !strings.Contains(err.Error(), p+" =") {
				t.Errorf("%s: got %v, want an error naming %s", tc.name, err, p)
			}
		}
	}
}

// TestModelFileLayers: model.file and model.params come from the YAML file,
// CAIRN_MODEL_FILE / CAIRN_MODEL_PARAMS and --model / --params, the later layer winning.
func TestModelFileLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(path, []byte("model:\n  file: a.onnx\n  params: [\"fc.*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		environ    []string
		file       string
		wantParams []string
	}{
		{"default", nil, nil, "", nil},
		{"file", []string{"--config", path}, nil, "a.onnx", []string{"fc.*"}},
		{"env", nil, []string{"CAIRN_MODEL_FILE=b.onnx", "CAIRN_MODEL_PARAMS=x.*,y.*"}, "b.onnx", []string{"x.*", "y.*"}},
		{"flags", []string{"--model", "c.onnx", "--params", "layer3.*, fc.*"}, nil, "c.onnx", []string{"layer3.*", "fc.*"}},
		{"flag over file", []string{"--config", path, "--model=d.onnx"}, nil, "d.onnx", []string{"fc.*"}},
	} {
		fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
		f := RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := f.Load(fs, tc.environ)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Model.File != tc.file || !slices.Equal(c.Model.Params, tc.wantParams) {
			t.Errorf("%s: file %q params %q, want %q and %q", tc.name, c.Model.File, c.Model.Params, tc.file, tc.wantParams)
		}
	}
}
