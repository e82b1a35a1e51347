package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestPercentile checks the nearest-rank quantile against its definition: the
// smallest value v with #{x ≤ v} ≥ p·n.
func TestPercentile(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64((i * 37) % 200) // a permutation of 0..199
	}
	for _, p := range []float64{0.01, 0.5, 0.99, 1} {
		got := percentile(append([]float64(nil), xs...), p)
		// Reference by definition, by brute force over the candidates.
		want := math.Inf(1)
		for _, v := range xs {
			cnt := 0
			for _, x := range xs {
				if x <= v {
					cnt++
				}
			}
			if float64(cnt) >= p*float64(len(xs)) && v < want {
				want = v
			}
		}
		if got != want {
			t.Errorf("percentile(p=%v) = %v, want %v", p, got, want)
		}
	}
	if got := percentile([]float64{3}, 0.99); got != 3 {
		t.Errorf("percentile of one value = %v, want 3", got)
	}
}

// TestProgressLines: a non-terminal gets periodic lines and a final line, never
// carriage returns; the final line shows the full count.
func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, "produce", 10)
	if p.tty {
		t.Fatal("a bytes.Buffer is not a terminal")
	}
	p.update(3) // too soon for a line
	if b.Len() != 0 {
		t.Errorf("update within %v wrote %q, want nothing", progressEvery, b.String())
	}
	p.last = p.last.Add(-2 * progressEvery)
	p.update(5)
	p.finish(10)
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || strings.Contains(out, "\r") {
		t.Fatalf("progress output %q: want 2 lines without \\r", out)
	}
	if !strings.Contains(lines[0], "5/10") || !strings.Contains(lines[0], " 50%") {
		t.Errorf("line %q: want 5/10 and 50%%", lines[0])
	}
	if !strings.Contains(lines[1], "10/10") || !strings.Contains(lines[1], "100%") || !strings.Contains(lines[1], strings.Repeat("=", 30)) {
		t.Errorf("final line %q: want a full bar and 10/10", lines[1])
	}
}
