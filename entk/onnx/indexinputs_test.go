package onnx

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// TestIndexInputs: the embedding MLP reads x[2] and x[3] as codes of tables of 5 and 3
// rows; a model without run-time Gather indices has none; an index computed by
// arithmetic (x + 1) is not an input position and is not listed.
func TestIndexInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	m, err := LoadBytes(embMLP(t, r), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := m.IndexInputs()
	want := []IndexInput{{Pos: 2, N: 5}, {Pos: 3, N: 3}}
	if len(got) != len(want) {
		t.Fatalf("IndexInputs = %+v, want positions %+v", got, want)
	}
	for i := range want {
		if got[i].Pos != want[i].Pos || got[i].N != want[i].N || got[i].Node == "" {
			t.Errorf("IndexInputs[%d] = %+v, want %+v with its node", i, got[i], want[i])
		}
	}

	b := newBuilder(17)
	b.input("x", -1, 3)
	out := b.node("Gemm", []string{"x", b.initF("fc.weight", []int{2, 3}, randVals(r, 6, 1))}, aInt("transB", 1))
	b.output(out)
	if m, err = LoadBytes(b.bytes(t), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := m.IndexInputs(); got != nil {
		t.Errorf("a Linear model: IndexInputs = %+v, want none", got)
	}

	// codes = Cast(x + 1): the index is x_j + 1, not an input position.
	b = newBuilder(17)
	b.input("x", -1, 2)
	shifted := b.node("Add", []string{"x", b.initF("one", []int{1}, []float64{1})})
	codes := b.node("Cast", []string{shifted}, aInt("to", int64(onnxpb.TensorProto_INT64)))
	emb := b.node("Gather", []string{b.initF("emb.weight", []int{4, 2}, randVals(r, 8, 1)), codes})
	b.output(b.node("Flatten", []string{emb}, aInt("axis", 1)))
	if m, err = LoadBytes(b.bytes(t), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := m.IndexInputs(); !reflect.DeepEqual(got, []IndexInput(nil)) {
		t.Errorf("codes x + 1: IndexInputs = %+v, want none", got)
	}
}

// TestIndexInputsReference: PyTorch's export of the Adult embedding MLP
// (testdata/embmlp.onnx, scripts/onnx-reference) reads its 8 categorical columns, after
// the 6 numeric ones, as codes of the tables its ref.json lists (emb.k.weight of shape
// [cardinality, 4]).
func TestIndexInputsReference(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "embmlp.ref.json"))
	if err != nil {
		t.Skipf("no reference file: %v", err)
	}
	var ref struct {
		Params []struct {
			Name  string `json:"name"`
			Shape []int  `json:"shape"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	var want []IndexInput
	for _, p := range ref.Params {
		var k int
		if n, _ := fmt.Sscanf(p.Name, "emb.%d.weight", &k); n == 1 {
			want = append(want, IndexInput{Pos: 6 + k, N: p.Shape[0]})
		}
	}
	m, err := Load(filepath.Join("testdata", "embmlp.onnx"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := m.IndexInputs()
	if len(want) != 8 || len(got) != len(want) {
		t.Fatalf("IndexInputs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Pos != want[i].Pos || got[i].N != want[i].N {
			t.Errorf("IndexInputs[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
