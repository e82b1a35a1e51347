package dataset

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadCSV(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		n       int
		wantX   []float64
		wantD   int
		labels  []int
		classes int
		ids     []string
	}{
		{"no-header", "1,2\n3,4\n", 0, []float64{1, 2, 3, 4}, 2, nil, 0, []string{"csv/train/000000", "csv/train/000001"}},
		{"header", "a,b\n1,2\n3,4\n", 0, []float64{1, 2, 3, 4}, 2, nil, 0, []string{"csv/train/000000", "csv/train/000001"}},
		{"label-middle", "a, Label ,b\n1,0,2\n3,4,4\n", 0, []float64{1, 2, 3, 4}, 2, []int{0, 4}, 5, []string{"csv/train/000000", "csv/train/000001"}},
		{"id-and-label", "id,x,label\np1,1.5,1\np2,-2e-3,0\n", 0, []float64{1.5, -2e-3}, 1, []int{1, 0}, 2, []string{"p1", "p2"}},
		{"quoted-spaces", "\"x\", y\n 1, \"2\"\n", 0, []float64{1, 2}, 2, nil, 0, []string{"csv/train/000000"}},
		{"n-limit", "1\n2\n3\n", 2, []float64{1, 2}, 1, nil, 0, []string{"csv/train/000000", "csv/train/000001"}},
		{"n-exact", "1\n2\n", 2, []float64{1, 2}, 1, nil, 0, []string{"csv/train/000000", "csv/train/000001"}},
		{"numeric-looking-header-is-data", "1,2\n", 0, []float64{1, 2}, 2, nil, 0, []string{"csv/train/000000"}},
	}
	for _, tc := range cases {
		s, err := readCSV(strings.NewReader(tc.in), "train", tc.n)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(s.X, tc.wantX) || s.D != tc.wantD || s.N != len(tc.wantX)/tc.wantD ||
			!slices.Equal(s.Labels, tc.labels) || s.Classes != tc.classes || !slices.Equal(s.IDs, tc.ids) {
			t.Errorf("%s: got X %v D %d N %d labels %v classes %d ids %v; want %v %d %v %d %v",
				tc.name, s.X, s.D, s.N, s.Labels, s.Classes, s.IDs, tc.wantX, tc.wantD, tc.labels, tc.classes, tc.ids)
		}
	}
}

func TestReadCSVBad(t *testing.T) {
	cases := []struct {
		name string
		in   string
		n    int
		want error
	}{
		{"empty", "", 0, ErrFormat},
		{"header-only", "a,b\n", 0, ErrFormat},
		{"bad-value", "a,b\n1,x\n", 0, ErrFormat},
		{"nan", "a,b\n1,NaN\n", 0, ErrNotFinite},
		{"inf", "1,2\n-Inf,2\n", 0, ErrNotFinite},
		{"overflow", "a\n1e999\n", 0, ErrFormat},
		{"ragged", "1,2\n3\n", 0, ErrFormat},
		{"bad-quote", "a,b\n\"1,2\n", 0, ErrFormat},
		{"label-negative", "x,label\n1,-1\n", 0, ErrFormat},
		{"label-float", "x,label\n1,0.5\n", 0, ErrFormat},
		{"two-labels", "label,x,LABEL\n1,2,3\n", 0, ErrFormat},
		{"two-ids", "id,x,Id\na,2,b\n", 0, ErrFormat},
		{"dup-id", "id,x\na,1\na,2\n", 0, ErrFormat},
		{"empty-id", "id,x\n,1\n", 0, ErrFormat},
		{"no-features", "id,label\na,1\n", 0, ErrFormat},
		{"n-too-large", "1\n2\n", 3, ErrRows},
	}
	for _, tc := range cases {
		if s, err := readCSV(strings.NewReader(tc.in), "train", tc.n); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v (set %v), want %v", tc.name, err, s, tc.want)
		}
	}
}

func TestOpenCSVSplit(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "train.csv"), []byte("x\n1\n2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "test.csv"), []byte("x\n3\n"), 0o644)
	s, err := Open("csv:"+filepath.Join(dir, "{split}.csv"), "test", 0)
	if err != nil || !slices.Equal(s.X, []float64{3}) || s.IDs[0] != "csv/test/000000" {
		t.Errorf("{split}=test: got %v, %v", s, err)
	}
	if _, err := Open("csv:"+filepath.Join(dir, "train.csv"), "test", 0); !errors.Is(err, ErrSplit) {
		t.Errorf("no placeholder, split test: got %v, want ErrSplit", err)
	}
	s, err = Open("csv:"+filepath.Join(dir, "train.csv"), "train", 1)
	if err != nil || s.N != 1 || s.IsImage() {
		t.Errorf("train n=1: got %v, %v", s, err)
	}
	_, err = Open("csv:"+filepath.Join(dir, "train.csv"), "train", 5)
	if !errors.Is(err, ErrRows) || !strings.Contains(err.Error(), `n=5`) || !strings.Contains(err.Error(), "train.csv") {
		t.Errorf("n=5: error %v should wrap ErrRows and name n and the file", err)
	}
}

// FuzzReadCSV: any input yields a consistent Set of finite values or an error wrapping
// ErrFormat, ErrNotFinite or ErrRows; never a panic.
func FuzzReadCSV(f *testing.F) {
	f.Add("id,x,label\np1,1.5,1\np2,-2,0\n", 0)
	f.Add("1,2\n3,4\n", 1)
	f.Add("a,b\n1,NaN\n", 0)
	f.Add("\"", 0)
	f.Fuzz(func(t *testing.T, in string, n int) {
		if n < 0 {
			n = -n
		}
		s, err := readCSV(strings.NewReader(in), "train", n%4)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrNotFinite) && !errors.Is(err, ErrRows) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if s.N < 1 || s.D < 1 || len(s.X) != s.N*s.D || len(s.IDs) != s.N || (s.Labels != nil && len(s.Labels) != s.N) {
			t.Fatalf("inconsistent set N %d D %d len(X) %d ids %d labels %d", s.N, s.D, len(s.X), len(s.IDs), len(s.Labels))
		}
		for _, v := range s.X {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite %v accepted", v)
			}
		}
		for _, l := range s.Labels {
			if l < 0 || l >= s.Classes {
				t.Fatalf("label %d outside [0, %d)", l, s.Classes)
			}
		}
	})
}
