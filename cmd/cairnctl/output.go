package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// writeJSON writes v as one indented JSON object followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseInts parses a comma-separated list of integers such as "1,4,16".
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not an integer", flagName, f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty list", flagName)
	}
	return out, nil
}

// readMatrixCSV reads a headerless CSV of finite numbers, one row per line, all rows of
// equal length. It returns the rows flattened row-major, the row count and the width.
func readMatrixCSV(path string) (data []float64, rows, cols int, err error) {
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
