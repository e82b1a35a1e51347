package produce

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/dataset"
)

// TestRows: rows go in order, batch rows per call, with labels; a failing call leaves
// the count at the rows acknowledged before it, and the error names the failed rows.
func TestRows(t *testing.T) {
	set := &dataset.Set{Name: "csv", N: 7, D: 1, X: []float64{0, 1, 2, 3, 4, 5, 6},
		Labels: []int{0, 1, 0, 1, 0, 1, 0}, Classes: 2, IDs: []string{"a", "b", "c", "d", "e", "f", "g"}}
	var ids []string
	var sizes []int
	fail := 3 // the third call fails
	upsert := func(_ context.Context, pts ...client.Point) error {
		if len(sizes)+1 == fail {
			return errors.New("broker down")
		}
		sizes = append(sizes, len(pts))
		for _, p := range pts {
			if p.Label == nil || *p.Label != int64(p.X[0])%2 {
				t.Errorf("point %s: label %v, want %d", p.ID, p.Label, int(p.X[0])%2)
			}
			ids = append(ids, p.ID)
		}
		return nil
	}
	sent, err := Rows(context.Background(), set, 0, set.N, 3, nil, upsert)
	if sent != 6 || err == nil || !strings.Contains(err.Error(), "rows 6..6") {
		t.Errorf("Rows = %d, %v; want 6 and an error naming rows 6..6", sent, err)
	}
	if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(ids, want) || !slices.Equal(sizes, []int{3, 3}) {
		t.Errorf("sent %v in batches %v, want %v in batches [3 3]", ids, sizes, want)
	}
	fail, ids, sizes = 0, nil, nil
	if sent, err := Rows(context.Background(), set, 2, 5, 2, nil, upsert); sent != 3 || err != nil || !slices.Equal(ids, []string{"c", "d", "e"}) {
		t.Errorf("rows [2, 5): sent %d %v, err %v; want 3 [c d e]", sent, ids, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sent, err := Rows(ctx, set, 0, set.N, 2, nil, upsert); sent != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %d, %v; want 0, context.Canceled", sent, err)
	}
}

// TestProgressLines: a non-terminal gets periodic lines and a final line, never
// carriage returns; the final line shows the full count.
func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "produce", 10)
	if p.tty {
		t.Fatal("a bytes.Buffer is not a terminal")
	}
	p.Update(3) // too soon for a line
	if b.Len() != 0 {
		t.Errorf("update within %v wrote %q, want nothing", Every, b.String())
	}
	p.last = p.last.Add(-2 * Every)
	p.Update(5)
	p.Finish(10)
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

// TestIsTerminal: /dev/null is a character device but no terminal, and a progress
// report to it writes lines, not carriage returns.
func TestIsTerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Errorf("IsTerminal(%s) = true, want false", os.DevNull)
	}
	if NewProgress(f, "produce", 1).tty {
		t.Errorf("progress on %s draws a bar, want lines", os.DevNull)
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("IsTerminal(bytes.Buffer) = true, want false")
	}
}
