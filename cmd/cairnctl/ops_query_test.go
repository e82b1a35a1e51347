package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseVector(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []float64
		err      string // substring of the error; "" for success
	}{
		{"json", "[1, -2.5, 3e2]", []float64{1, -2.5, 300}, ""},
		{"json multiline", "[\n 0.5,\n 0\n]\n", []float64{0.5, 0}, ""},
		{"csv", "1,-2.5,3e2\n", []float64{1, -2.5, 300}, ""},
		{"csv spaces", "  1, 2 ,3  ", []float64{1, 2, 3}, ""},
		{"csv one value", "7", []float64{7}, ""},
		{"bom", "\xef\xbb\xbf[4,5]", []float64{4, 5}, ""},
		{"csv underflow is zero", "1e-400,1", []float64{0, 1}, ""},
		{"empty", " \n", nil, "empty"},
		{"json empty", "[]", nil, "no values"},
		{"json null", "[1,null]", nil, "element 1 is null"},
		{"json string", `[1,"2"]`, nil, "not a JSON array of numbers"},
		{"json overflow", "[1e400]", nil, "not a JSON array of numbers"},
		{"json two arrays", "[1] [2]", nil, "text after the JSON array"},
		{"json trailing garbage", "[1] x", nil, "text after the JSON array"},
		{"json unterminated", "[1,2", nil, "not a JSON array of numbers"},
		{"json object", `{"x":[1]}`, nil, "a JSON object; want a JSON array"},
		{"csv word", "1,abc,3", nil, `element 1: "abc" is not a number`},
		{"csv nan", "1,NaN", nil, "element 1: NaN is not finite"},
		{"csv inf", "Inf,1", nil, "element 0: +Inf is not finite"},
		{"csv overflow", "1,1e400", nil, "element 1: \"1e400\" overflows float64"},
		{"csv two lines", "1,2\n3,4\n", nil, "2 CSV lines; want one vector"},
		{"csv ragged quote", "1,\"2", nil, "not one CSV line"},
		{"csv empty field", "1,,2", nil, `element 1: "" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVector([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseVector(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseVector(%q) error: %v", tc.in, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parseVector(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestReadVectorNamesFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "q.csv")
	if err := os.WriteFile(bad, []byte("1,oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.json")} {
		_, err := readVector(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--x") {
			t.Errorf("readVector(%s) error %v: want one naming --x and the file", path, err)
		}
	}
	good := filepath.Join(dir, "q.json")
	if err := os.WriteFile(good, []byte("[0.25, 1]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if x, err := readVector(good); err != nil || !slices.Equal(x, []float64{0.25, 1}) {
		t.Errorf("readVector(%s) = %v, %v; want [0.25 1]", good, x, err)
	}
}

func FuzzParseVector(f *testing.F) {
	for _, s := range []string{"[1,2]", "1,2", "", "[1,null]", "1e400", "[\"a\"]", "1,\"2", "\xef\xbb\xbf[1]", "[1] [2]", "NaN"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := parseVector(b)
		if err != nil {
			return
		}
		if len(x) == 0 {
			t.Fatalf("parseVector(%q) accepted an empty vector", b)
		}
		for i, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("parseVector(%q)[%d] = %v accepted", b, i, v)
			}
		}
	})
}
