package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Reference values read from the raw files with an independent Python gzip/struct
// reader: the first ten labels of each split and the pixel sum of image 0.
var idxRefs = []struct {
	spec, split string
	labels      []int
	pixelSum0   int // Σ of the raw bytes of image 0
}{
	{"mnist", "train", []int{5, 0, 4, 1, 9, 2, 1, 3, 1, 4}, 27525},
	{"mnist", "test", []int{7, 2, 1, 0, 4, 1, 4, 9, 5, 9}, 18454},
	{"fashion-mnist", "train", []int{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, 76247},
	{"fashion-mnist", "test", []int{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, 33456},
}

func skipWithoutIDX(t *testing.T, spec string) {
	t.Helper()
	var err error
	if spec == "mnist" {
		_, err = mnistDir()
	} else {
		_, err = fashionMNISTDir()
	}
	if errors.Is(err, ErrNotFound) {
		t.Skipf("%s files not installed here: %v", spec, err)
	}
}

func TestOpenIDXSets(t *testing.T) {
	for _, ref := range idxRefs {
		t.Run(ref.spec+"/"+ref.split, func(t *testing.T) {
			skipWithoutIDX(t, ref.spec)
			s, err := Open(ref.spec, ref.split, 200)
			if err != nil {
				t.Fatal(err)
			}
			if s.N != 200 || s.D != 784 || s.Shape != [3]int{1, 28, 28} || s.Classes != 10 || len(s.X) != 200*784 || len(s.IDs) != 200 {
				t.Fatalf("got N %d D %d shape %v classes %d len(X) %d", s.N, s.D, s.Shape, s.Classes, len(s.X))
			}
			if !slices.Equal(s.Labels[:10], ref.labels) {
				t.Errorf("first labels: got %v, want %v", s.Labels[:10], ref.labels)
			}
			var sum float64
			for _, v := range s.Row(0) {
				sum += v
			}
			// Row sum is Σ p/255 with ≤ 784 roundings of relative size 1e-16.
			if want := float64(ref.pixelSum0) / 255; abs(sum-want) > 1e-9 {
				t.Errorf("row 0 pixel sum: got %v, want %v", sum, want)
			}
			lo, hi := 1.0, 0.0
			for _, v := range s.X {
				lo, hi = min(lo, v), max(hi, v)
			}
			if lo != 0 || hi != 1 {
				t.Errorf("pixel range [%v, %v], want [0, 1]", lo, hi)
			}
			for i, l := range s.Labels {
				if l < 0 || l > 9 {
					t.Fatalf("label %d = %d", i, l)
				}
			}
			if want := ref.spec + "/" + ref.split + "/000123"; s.IDs[123] != want {
				t.Errorf("id 123: got %q, want %q", s.IDs[123], want)
			}
		})
	}
}

func TestOpenIDXFullTestSplit(t *testing.T) {
	skipWithoutIDX(t, "mnist")
	s, err := Open("mnist", "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 10000 || len(s.Labels) != 10000 {
		t.Fatalf("N = %d, want 10000", s.N)
	}
	if _, err := Open("mnist", "test", 10001); !errors.Is(err, ErrRows) {
		t.Errorf("n = 10001: got %v, want ErrRows", err)
	}
}

// writeIDXDir writes a hand-built MNIST-shaped directory (uncompressed file names, so
// the ".gz"-absent fallback is exercised) and points CAIRN_MNIST_DIR at it.
func writeIDXDir(t *testing.T, images, labels []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train-images-idx3-ubyte"), images, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train-labels-idx1-ubyte.gz"), gz(labels), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAIRN_MNIST_DIR", dir)
}

func TestOpenIDXHandBuilt(t *testing.T) {
	pix := []byte{0, 255, 51, 102, 0, 0, 255, 255} // two 2×2 images
	writeIDXDir(t, mkIDX(0x08, []uint32{2, 2, 2}, pix), mkIDX(0x08, []uint32{2}, []byte{3, 9}))
	s, err := Open("mnist", "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 1, 0.2, 0.4, 0, 0, 1, 1}
	if s.Shape != [3]int{1, 2, 2} || !slices.Equal(s.X, want) || !slices.Equal(s.Labels, []int{3, 9}) {
		t.Errorf("got shape %v X %v labels %v, want (1,2,2) %v [3 9]", s.Shape, s.X, s.Labels, want)
	}
	if _, err := Open("mnist", "test", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing test files: got %v, want ErrNotFound", err)
	}
}

func TestOpenIDXBadFiles(t *testing.T) {
	img := mkIDX(0x08, []uint32{2, 2, 2}, seq(8))
	cases := []struct {
		name           string
		images, labels []byte
		want           error
	}{
		{"count-mismatch", img, mkIDX(0x08, []uint32{3}, []byte{1, 2, 3}), ErrIDX},
		{"label-10", img, mkIDX(0x08, []uint32{2}, []byte{1, 10}), ErrIDX},
		{"images-1d", mkIDX(0x08, []uint32{8}, seq(8)), mkIDX(0x08, []uint32{2}, []byte{1, 2}), ErrIDX},
		{"labels-2d", img, mkIDX(0x08, []uint32{2, 1}, []byte{1, 2}), ErrIDX},
		{"corrupt-images", img[:10], mkIDX(0x08, []uint32{2}, []byte{1, 2}), ErrIDX},
	}
	for _, tc := range cases {
		writeIDXDir(t, tc.images, tc.labels)
		if _, err := Open("mnist", "train", 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	t.Setenv("CAIRN_MNIST_DIR", filepath.Join(t.TempDir(), "absent"))
	if _, err := Open("mnist", "train", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent CAIRN_MNIST_DIR: got %v, want ErrNotFound", err)
	}
}

func TestOpenArguments(t *testing.T) {
	cases := []struct {
		spec, split string
		n           int
		want        error
	}{
		{"mnist", "valid", 0, ErrSplit},
		{"mnist", "train", -1, ErrRows},
		{"mnist:x", "train", 0, ErrSpec},
		{"adult:", "train", 0, ErrSpec},
		{"csv", "train", 0, ErrSpec},
		{"imagenet", "train", 0, ErrSpec},
		{"", "train", 0, ErrSpec},
		{"adult:/nonexistent", "train", 0, ErrNotFound},
		{"csv:/nonexistent.csv", "train", 0, ErrNotFound},
	}
	for _, tc := range cases {
		_, err := Open(tc.spec, tc.split, tc.n)
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%q, %q, %d): got %v, want %v", tc.spec, tc.split, tc.n, err, tc.want)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
