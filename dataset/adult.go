package dataset

import (
	"bufio"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// adultFiles is the copy of UCI Adult shipped in the module (dataset/adult: the two UCI
// files, gzip-compressed; adult/ATTRIBUTION.md gives the source, licence and SHA-256
// of each), which the spec "adult" loads.
//
//go:embed adult/adult.data.gz adult/adult.test.gz
var adultFiles embed.FS

// UCI Adult (Becker & Kohavi 1996): 14 attributes and the income label, comma + space
// separated, no header. Columns 0, 2, 4, 10, 11, 12 (age, fnlwgt, education-num,
// capital-gain, capital-loss, hours-per-week) are numeric; the other eight are categorical.
const adultFields = 15

var adultNumeric = [adultFields - 1]bool{0: true, 2: true, 4: true, 10: true, 11: true, 12: true}

// adultRecord is one parsed line.
type adultRecord struct {
	fields [adultFields - 1]string
	num    [adultFields - 1]float64 // set for numeric columns only
	label  int
}

// adultEncoding maps records to feature vectors; it is estimated on the full train file.
type adultEncoding struct {
	cats      [adultFields - 1][]string // sorted categories of each categorical column
	mean, std [adultFields - 1]float64  // of each numeric column
	dim       int
}

// openAdult loads adult.data (train) or adult.test (test) from fsys, each file or its
// gzip-compressed form (adult.data.gz, adult.test.gz) when the plain one is absent;
// where names fsys in errors (a directory, or the shipped copy). The encoding, always
// estimated on the complete train file whatever the split and n:
//
//   - columns keep their file order; a numeric column becomes one feature standardized
//     with the train mean and population standard deviation ((x − mean)/std);
//   - a categorical column becomes a one-hot block over its train categories in sorted
//     byte order. A missing value "?" (in workclass, occupation, native-country) is a
//     category of its own: missingness is informative in Adult and this keeps every row
//     a valid one-hot vector. This gives D = 6 + 102 = 108 on the UCI files. A category
//     seen only in the test file (none in the UCI files) encodes as an all-zero block;
//   - label 1 for ">50K", 0 for "<=50K" (the trailing "." of adult.test is dropped);
//   - blank lines and lines starting with "|" (the first line of the original
//     adult.test, "|1x3 Cross validator") are skipped; every other line must have 15
//     fields and finite numeric values.
func openAdult(fsys fs.FS, where, split string, n int) (*Set, error) {
	train, err := readAdult(fsys, where, "adult.data")
	if err != nil {
		return nil, err
	}
	enc, err := newAdultEncoding(train)
	if err != nil {
		return nil, err
	}
	recs := train
	if split == "test" {
		if recs, err = readAdult(fsys, where, "adult.test"); err != nil {
			return nil, err
		}
	}
	rows, err := checkRows(n, len(recs))
	if err != nil {
		return nil, err
	}
	s := &Set{
		Name: "adult", N: rows, D: enc.dim, X: make([]float64, rows*enc.dim),
		Labels: make([]int, rows), Classes: 2, IDs: make([]string, rows),
	}
	for i := range rows {
		enc.encodeTo(s.Row(i), &recs[i])
		s.Labels[i] = recs[i].label
		s.IDs[i] = pointID("adult", split, i)
	}
	return s, nil
}

// adultFS is the file system of an Adult spec's argument: the shipped copy for "" (named
// dataset/adult in messages, its place in the module), else the directory dir.
func adultFS(dir string) (fsys fs.FS, where string) {
	if dir == "" {
		sub, err := fs.Sub(adultFiles, "adult")
		if err != nil {
			panic(err) // the embed pattern above names the directory
		}
		return sub, "dataset/adult"
	}
	return os.DirFS(dir), dir
}

// openAdultFile opens name in fsys, or name.gz through a gzip reader when name does not
// exist; path is where it was found, for messages.
func openAdultFile(fsys fs.FS, where, name string) (r io.ReadCloser, path string, err error) {
	path = filepath.Join(where, name)
	f, err := fsys.Open(name)
	if err == nil {
		return f, path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("%w: %s: %v", ErrNotFound, path, err)
	}
	gz, gzErr := fsys.Open(name + ".gz")
	if gzErr != nil {
		return nil, path, fmt.Errorf("%w: %s (nor %s.gz): %v", ErrNotFound, path, name, err)
	}
	zr, err := gzip.NewReader(gz)
	if err != nil {
		gz.Close()
		return nil, path + ".gz", fmt.Errorf("%w: %s.gz: %v", ErrFormat, path, err)
	}
	return gzipFile{zr, gz}, path + ".gz", nil
}

// gzipFile closes both the gzip reader and the file under it.
type gzipFile struct {
	*gzip.Reader
	f io.Closer
}

func (g gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }

func readAdult(fsys fs.FS, where, name string) ([]adultRecord, error) {
	f, path, err := openAdultFile(fsys, where, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []adultRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "|") {
			continue
		}
		rec, err := parseAdultLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %s has no records", ErrFormat, path)
	}
	return recs, nil
}

func parseAdultLine(text string) (adultRecord, error) {
	var rec adultRecord
	parts := strings.Split(text, ",")
	if len(parts) != adultFields {
		return rec, fmt.Errorf("%w: %d fields, want %d", ErrFormat, len(parts), adultFields)
	}
	for j := range adultFields - 1 {
		v := strings.TrimSpace(parts[j])
		if v == "" {
			return rec, fmt.Errorf("%w: column %d is empty", ErrFormat, j)
		}
		rec.fields[j] = v
		if adultNumeric[j] {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return rec, fmt.Errorf("%w: column %d = %q is not a number", ErrFormat, j, v)
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return rec, fmt.Errorf("%w: column %d = %q", ErrNotFinite, j, v)
			}
			rec.num[j] = x
		}
	}
	switch lab := strings.TrimSuffix(strings.TrimSpace(parts[adultFields-1]), "."); lab {
	case ">50K":
		rec.label = 1
	case "<=50K":
		rec.label = 0
	default:
		return rec, fmt.Errorf("%w: label %q, want \">50K\" or \"<=50K\"", ErrFormat, lab)
	}
	return rec, nil
}

func newAdultEncoding(train []adultRecord) (*adultEncoding, error) {
	enc := &adultEncoding{}
	for j := range adultFields - 1 {
		if adultNumeric[j] {
			var sum float64
			for i := range train {
				sum += train[i].num[j]
			}
			mean := sum / float64(len(train))
			var ss float64
			for i := range train {
				d := train[i].num[j] - mean
				ss += d * d
			}
			std := math.Sqrt(ss / float64(len(train)))
			if std == 0 {
				return nil, fmt.Errorf("%w: numeric column %d is constant (%v) in the train file", ErrFormat, j, mean)
			}
			enc.mean[j], enc.std[j] = mean, std
			enc.dim++
			continue
		}
		seen := map[string]bool{}
		for i := range train {
			seen[train[i].fields[j]] = true
		}
		cats := make([]string, 0, len(seen))
		for c := range seen {
			cats = append(cats, c)
		}
		slices.Sort(cats)
		enc.cats[j] = cats
		enc.dim += len(cats)
	}
	return enc, nil
}

// encodeTo writes the encoding of rec into dst (len dim).
func (e *adultEncoding) encodeTo(dst []float64, rec *adultRecord) {
	clear(dst)
	k := 0
	for j := range adultFields - 1 {
		if adultNumeric[j] {
			dst[k] = (rec.num[j] - e.mean[j]) / e.std[j]
			k++
			continue
		}
		if c, ok := slices.BinarySearch(e.cats[j], rec.fields[j]); ok {
			dst[k+c] = 1
		}
		k += len(e.cats[j])
	}
}
