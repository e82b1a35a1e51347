package offline

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ReadMatrixCSV reads a headerless CSV of finite numbers, one row per line, all rows of
// equal length. It returns the rows flattened row-major, the row count and the width.
func ReadMatrixCSV(path string) (data []float64, rows, cols int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 0 // every record must have as many fields as the first
	r.TrimLeadingSpace = true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		if rows == 0 {
			cols = len(rec)
		}
		for j, field := range rec {
			v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s: row %d column %d: %q is not a number", path, rows+1, j+1, field)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, 0, fmt.Errorf("%s: row %d column %d: %v is not finite", path, rows+1, j+1, v)
			}
			data = append(data, v)
		}
		rows++
	}
	if rows == 0 {
		return nil, 0, 0, fmt.Errorf("%s: no rows", path)
	}
	return data, rows, cols, nil
}
