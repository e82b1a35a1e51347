package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenCases are commands whose JSON is deterministic for their seed and quick (each
// well under 10 s). Inputs are under testdata/golden; the expected outputs are
// testdata/golden/NAME.json. fit and explain read MNIST from the GoMNIST module.
var goldenCases = []struct {
	name string
	args []string
}{
	{"entk-kernel-exact", []string{"entk", "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", "testdata/golden/x.csv", "--exact"}},
	{"entk-kernel-sketched", []string{"entk", "kernel", "--arch", "mlp:6-8-4", "--untrained", "--in", "testdata/golden/x.csv", "--h", "2", "--s", "16", "--seed", "1"}},
	{"select-features", []string{"select", "--features", "testdata/golden/f.csv", "--m", "5", "--lambda", "1", "--seed", "1"}},
	{"verify-srht", []string{"verify", "srht", "--P", "64", "--s", "8", "--draws", "200", "--seed", "1"}},
	{"verify-two-axis", []string{"verify", "two-axis", "--arch", "mlp:6-8-4", "--seed", "1", "--draws", "8", "--h", "1,4", "--s", "16,0"}},
	{"verify-product-rule", []string{"verify", "product-rule", "--arch", "mlp:6-8-4", "--landmarks", "6", "--realizations", "8", "--seed", "1"}},
	{"verify-certificate", []string{"verify", "certificate", "--arch", "mlp:6-8-4", "--queries", "20", "--k", "2", "--delta", "0.1", "--h", "2", "--s", "16", "--seed", "1", "--omega", "halving"}},
	{"fit-simclr-adam", []string{"fit", "--data", "mnist", "--n", "600", "--m", "16", "--h", "2", "--s", "64", "--loss", "simclr", "--init", "pci", "--solver", "adam", "--seed", "1"}},
	{"fit-bt-lanczos-fits2", []string{"fit", "--data", "mnist", "--n", "600", "--m", "16", "--h", "2", "--s", "64", "--loss", "bt", "--init", "pci-lanczos", "--solver", "adam", "--fits", "2", "--seed", "1"}},
	{"fit-vicreg-krepes", []string{"fit", "--data", "mnist", "--n", "600", "--m", "16", "--h", "2", "--s", "64", "--loss", "vicreg", "--init", "pci", "--solver", "krepes", "--seed", "1"}},
	{"explain", []string{"explain", "--data", "mnist", "--n", "600", "--m", "16", "--h", "2", "--s", "64", "--loss", "simclr", "--init", "pci", "--query", "0", "--k", "3", "--delta", "0.05", "--fits", "2"}},
}

// TestGolden runs each golden case and compares its JSON with the golden file: the same
// keys at every level and the same values, numbers compared exactly as written (runs
// are seeded and deterministic). Wall-clock timings — every value under a key
// containing "seconds" — are masked to "<timing>" in both before comparing, so only
// their presence and shape are checked. go test -run TestGolden -update rewrites the
// files.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := cmdRun(c.args[0], c.args[1:], &out); err != nil {
				t.Fatalf("cairnctl %s: %v", strings.Join(c.args, " "), err)
			}
			got := maskTimings("", decodeJSON(t, out.Bytes()))
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			want := decodeJSON(t, b)
			for _, d := range jsonDiff("$", got, want) {
				t.Errorf("cairnctl %s: %s", strings.Join(c.args, " "), d)
			}
		})
	}
}

// decodeJSON decodes b keeping numbers as written (json.Number), so they compare
// exactly: encoding/json writes the shortest text that reads back as the same float64.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("output is not JSON: %v: %.300q", err, b)
	}
	return v
}

// maskTimings replaces every leaf under a key containing "seconds" with "<timing>",
// keeping the keys and array lengths.
func maskTimings(key string, v any) any {
	timing := strings.Contains(key, "seconds")
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if timing {
				v[k] = maskTimings(key, x)
			} else {
				v[k] = maskTimings(k, x)
			}
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = maskTimings(key, x)
		}
		return v
	}
	if timing && v != nil {
		return "<timing>"
	}
	return v
}

// jsonDiff lists the differences between got and want under path: missing and extra
// keys, array lengths, and values.
func jsonDiff(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want an object", path, got)}
		}
		var diffs []string
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing key", path, k))
				continue
			}
			diffs = append(diffs, jsonDiff(path+"."+k, g[k], w[k])...)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: unexpected key", path, k))
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %.200v, want an array of %d", path, got, len(w))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, jsonDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return diffs
	}
	if !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestJSONDiff checks the comparison TestGolden relies on catches a changed key, a
// missing key, a changed number in its last digit and a changed array length, and
// ignores timings.
func TestJSONDiff(t *testing.T) {
	want := `{"a": 0.1, "b": [1, 2], "seconds": {"fit": 1.5}, "c": {"d": "x"}}`
	for _, c := range []struct {
		got   string
		diffs int
	}{
		{`{"a": 0.1, "b": [1, 2], "seconds": {"fit": 2.5}, "c": {"d": "x"}}`, 0},
		{`{"a": 0.10000000000000002, "b": [1, 2], "seconds": {"fit": 1.5}, "c": {"d": "x"}}`, 1},
		{`{"a": 0.1, "b": [1, 2], "seconds": {"fit": 1.5}, "c": {"e": "x"}}`, 2},
		{`{"a": 0.1, "b": [1], "seconds": {"fit": 1.5}, "c": {"d": "x"}}`, 1},
		{`{"a": 0.1, "b": [1, 2], "seconds": {"fit": 1.5}}`, 1},
	} {
		g := maskTimings("", decodeJSON(t, []byte(c.got)))
		w := maskTimings("", decodeJSON(t, []byte(want)))
		if d := jsonDiff("$", g, w); len(d) != c.diffs {
			t.Errorf("%s: got differences %q, want %d", c.got, d, c.diffs)
		}
	}
}
