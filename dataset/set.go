package dataset

import (
	"fmt"
	"strings"
)

// Set is a loaded split of a data set, held in memory.
type Set struct {
	// Name is the canonical data set name: "mnist", "fashion-mnist", "adult" or "csv".
	Name string
	// X holds the N×D features, row-major: row i is X[i*D : (i+1)*D].
	X []float64
	// N and D are the number of rows and features.
	N, D int
	// Shape is (C, H, W) for images, with C·H·W = D; all zero for tabular data.
	Shape [3]int
	// Labels holds one class index in [0, Classes) per row, or nil without labels.
	Labels []int
	// Classes is the number of classes (0 without labels).
	Classes int
	// IDs holds one unique point id per row, "<name>/<split>/<row:06d>" unless the data
	// brings its own (a CSV "id" column).
	IDs []string
}

// Row returns row i of X. It is a view into X, not a copy: callers must not modify it.
func (s *Set) Row(i int) []float64 {
	return s.X[i*s.D : (i+1)*s.D : (i+1)*s.D]
}

// IsImage reports whether the set is image data (non-zero Shape).
func (s *Set) IsImage() bool { return s.Shape != [3]int{} }

// Open loads split ("train" or "test") of the data set named by spec and keeps its first
// n rows (n = 0 keeps all; n larger than the split is an error). spec is one of
//
//	mnist            MNIST from the GoMNIST module (or $CAIRN_MNIST_DIR)
//	fashion-mnist    Fashion-MNIST from /usr/share/datasets/fashion-mnist (or $CAIRN_FASHION_MNIST_DIR)
//	adult            UCI Adult, the copy shipped in this package (dataset/adult)
//	adult:DIR        UCI Adult from DIR/adult.data (train) and DIR/adult.test (test),
//	                 or their gzip-compressed forms adult.data.gz and adult.test.gz
//	csv:FILE         numeric CSV; a "{split}" in FILE is replaced by the split name, and
//	                 without it only split "train" is served
//
// The encodings are documented in the package doc.
func Open(spec, split string, n int) (s *Set, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("open spec %q split %q n=%d: %w", spec, split, n, err)
		}
	}()
	if split != "train" && split != "test" {
		return nil, fmt.Errorf("%w: %q, want \"train\" or \"test\"", ErrSplit, split)
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: n = %d < 0", ErrRows, n)
	}
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "mnist", "fashion-mnist":
		if arg != "" {
			return nil, fmt.Errorf("%w: %q takes no argument", ErrSpec, kind)
		}
		return openIDXSet(kind, split, n)
	case "adult":
		if strings.Contains(spec, ":") && arg == "" {
			return nil, fmt.Errorf("%w: want adult (the shipped copy) or adult:DIR", ErrSpec)
		}
		fsys, where := adultFS(arg)
		return openAdult(fsys, where, split, n)
	case "csv":
		if arg == "" {
			return nil, fmt.Errorf("%w: want csv:FILE", ErrSpec)
		}
		return openCSV(arg, split, n)
	}
	return nil, fmt.Errorf("%w: unknown kind %q (want mnist, fashion-mnist, adult, adult:DIR or csv:FILE)", ErrSpec, kind)
}

// pointID is the default id of row i: "<name>/<split>/<i:06d>".
func pointID(name, split string, i int) string {
	return fmt.Sprintf("%s/%s/%06d", name, split, i)
}

// checkRows validates n against the available rows and returns how many rows to keep.
func checkRows(n, avail int) (int, error) {
	if n > avail {
		return 0, fmt.Errorf("%w: n = %d exceeds the %d rows of the split", ErrRows, n, avail)
	}
	if n == 0 {
		return avail, nil
	}
	return n, nil
}
