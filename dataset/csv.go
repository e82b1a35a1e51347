package dataset

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// openCSV loads a numeric CSV file. path may contain "{split}", replaced by the split
// name ("data/{split}.csv"); without it the file is the train split and split "test" is
// an error, so a test set is never silently the training data.
func openCSV(path, split string, n int) (*Set, error) {
	if strings.Contains(path, "{split}") {
		path = strings.ReplaceAll(path, "{split}", split)
	} else if split != "train" {
		return nil, fmt.Errorf("%w: csv:%s has no {split} placeholder, so it serves only \"train\"", ErrSplit, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	defer f.Close()
	s, err := readCSV(f, split, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readCSV parses the CSV format of csv:FILE (RFC 4180 quoting, leading spaces trimmed,
// every record with the same number of fields):
//
//   - The first record is a header when any of its fields does not parse as a float64;
//     otherwise it is data (so a header whose names are all numbers is read as data).
//   - With a header, a column named "label" (case-insensitive) holds integer classes ≥ 0
//     (Classes = max + 1) and a column named "id" holds the point ids (non-empty,
//     unique); every other column is a feature. Without a header all columns are
//     features, there are no labels and ids are "csv/<split>/<row:06d>".
//   - Every feature must parse as a finite float64 ("NaN", "Inf" are rejected).
//
// n > 0 stops after n data rows (an error if the file has fewer).
func readCSV(r io.Reader, split string, n int) (*Set, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	first, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: empty file", ErrFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	cols := len(first)
	lay, header, err := csvHeader(first)
	if err != nil {
		return nil, err
	}
	pending := [][]string(nil) // the first record when it is data
	if !header {
		pending = append(pending, append([]string(nil), first...))
	}
	d := lay.features(cols)
	if d == 0 {
		return nil, fmt.Errorf("%w: no feature columns among %d columns", ErrFormat, cols)
	}
	s := &Set{Name: "csv", D: d}
	if lay.label >= 0 {
		s.Labels = []int{}
	}
	seen := map[string]int{}
	for n == 0 || s.N < n {
		var rec []string
		if len(pending) > 0 {
			rec, pending = pending[0], nil
		} else {
			rec, err = nextCSVRecord(cr)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
		}
		line, _ := cr.FieldPos(0)
		if err := appendCSVRow(s, rec, lay, line, seen); err != nil {
			return nil, err
		}
		if lay.id < 0 {
			s.IDs = append(s.IDs, pointID("csv", split, s.N))
		}
		s.N++
	}
	if s.N == 0 {
		return nil, fmt.Errorf("%w: no data rows", ErrFormat)
	}
	if n > s.N {
		return nil, fmt.Errorf("%w: n = %d exceeds the %d rows of the file", ErrRows, n, s.N)
	}
	return s, nil
}

// nextCSVRecord reads the next record of cr: io.EOF itself at the end of the file, and
// an ErrFormat error that names the line for a malformed record.
func nextCSVRecord(cr *csv.Reader) ([]string, error) {
	rec, err := cr.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: line %d: %v", ErrFormat, pe.Line, pe.Err)
		}
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return rec, nil
}

// csvLayout names the special columns of a CSV file: the index of its "label" and "id"
// columns, −1 where there is none.
type csvLayout struct{ label, id int }

// features is the number of feature columns among cols: all but the label and id columns.
func (l csvLayout) features(cols int) int {
	d := cols
	if l.label >= 0 {
		d--
	}
	if l.id >= 0 {
		d--
	}
	return d
}

// csvHeader decides whether the first record is a header (any field that does not parse
// as a float64) and, when it is, finds the label and id columns by name
// (case-insensitive, at most one of each).
func csvHeader(first []string) (lay csvLayout, header bool, err error) {
	lay = csvLayout{label: -1, id: -1}
	for _, v := range first {
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			header = true
			break
		}
	}
	if !header {
		return lay, false, nil
	}
	for j, name := range first {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "label":
			if lay.label >= 0 {
				return csvLayout{}, false, fmt.Errorf("%w: header has two label columns (%d and %d)", ErrFormat, lay.label, j)
			}
			lay.label = j
		case "id":
			if lay.id >= 0 {
				return csvLayout{}, false, fmt.Errorf("%w: header has two id columns (%d and %d)", ErrFormat, lay.id, j)
			}
			lay.id = j
		}
	}
	return lay, true, nil
}

// appendCSVRow appends the data record rec, which starts at line of the file, to s as its
// row s.N: the label (an integer ≥ 0; Classes grows to cover it), the id (non-empty, not
// in seen, which records it) and the features (finite float64s). It leaves s.N and the
// ids of a file without an id column to the caller.
func appendCSVRow(s *Set, rec []string, lay csvLayout, line int, seen map[string]int) error {
	for j, v := range rec {
		v = strings.TrimSpace(v)
		switch j {
		case lay.label:
			l, err := strconv.Atoi(v)
			if err != nil || l < 0 {
				return fmt.Errorf("%w: line %d: label %q is not an integer ≥ 0", ErrFormat, line, v)
			}
			s.Labels = append(s.Labels, l)
			s.Classes = max(s.Classes, l+1)
		case lay.id:
			if v == "" {
				return fmt.Errorf("%w: line %d: empty id", ErrFormat, line)
			}
			if prev, dup := seen[v]; dup {
				return fmt.Errorf("%w: line %d: id %q repeats row %d", ErrFormat, line, v, prev)
			}
			seen[v] = s.N
			s.IDs = append(s.IDs, v)
		default:
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%w: line %d column %d: %q is not a number", ErrFormat, line, j, v)
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: line %d column %d: %q", ErrNotFinite, line, j, v)
			}
			s.X = append(s.X, x)
		}
	}
	return nil
}
