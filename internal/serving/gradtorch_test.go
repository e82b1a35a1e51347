package serving

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
)

// TestGradientTorch: the gradient ranking's scores on convnet.onnx are PyTorch's
// (scripts/onnx-reference/gradient_ref.py: torch.autograd in float64 over every
// parameter, convnet.gradient.json) within their radius, the radius at float32 rounding
// level (1e-6 of the two gradients' norms), and the gradients' norms PyTorch's within
// 1e-10; on the ONNX backbone the file builds and on the shipped built-in convnet with
// the same parameters.
func TestGradientTorch(t *testing.T) {
	dir := filepath.Join("..", "..", "entk", "onnx", "testdata")
	var ref struct {
		Inputs [][]float64 `json:"inputs"`
	}
	var want struct {
		Queries, Points, Labels []int
		Scores                  [][]float64
		QueryNorms              []float64 `json:"query_norms"`
		PointNorms              []float64 `json:"point_norms"`
	}
	for name, v := range map[string]any{"convnet.ref.json": &ref, "convnet.gradient.json": &want} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	onnxB, _, err := entk.LoadONNX(filepath.Join(dir, "convnet.onnx"), nil)
	if err != nil {
		t.Fatal(err)
	}
	backbones := []entk.Backbone{onnxB}
	for _, f := range weights.Shipped {
		if c, _, err := weights.Load(f.Arch, "shipped:"+f.Name, "", false, 0); err == nil && slices.Equal(c.Params(), onnxB.Params()) {
			backbones = append(backbones, c)
		}
	}
	if len(backbones) != 2 {
		t.Fatalf("no shipped convnet has convnet.onnx's parameters")
	}
	for _, b := range backbones {
		var pts []GradPoint
		for i, p := range want.Points {
			pts = append(pts, GradPoint{ID: strconv.Itoa(i), Version: 1, X: ref.Inputs[p], Label: want.Labels[i]})
		}
		g, err := NewGradRows(b, pts, 1<<30, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, pn := range want.PointNorms {
			if math.Abs(g.norms[i]-pn) > 1e-10*pn {
				t.Errorf("%s: point %d gradient norm %v, PyTorch %v", b.Arch(), i, g.norms[i], pn)
			}
		}
		var w Workspace
		got := make([]float64, len(pts))
		for qi, q := range want.Queries {
			vn := g.queryTo(&w, ref.Inputs[q])
			if math.Abs(vn-want.QueryNorms[qi]) > 1e-10*vn {
				t.Errorf("%s: query %d gradient norm %v, PyTorch %v", b.Arch(), q, vn, want.QueryNorms[qi])
			}
			g.scoresTo(got, &w)
			for i, s := range want.Scores[qi] {
				r := g.radius(i, vn)
				if math.Abs(got[i]-s) > r || r > 1e-6*vn*g.norms[i] {
					t.Errorf("%s: query %d point %d: score %v, PyTorch %v, radius %v", b.Arch(), q, i, got[i], s, r)
				}
			}
		}
	}
}
