package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestProduceStopsOnCancel: produce blocked on a broker that never answers returns
// soon after its context ends, reports the rows acknowledged so far (none) and fails.
func TestProduceStopsOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() { // accept and never answer; closed with ln and the test
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"produce", "--brokers", ln.Addr().String(), "--data", "csv:" + writeCSV(t, 20, 3), "--batch", "5"}, nil, &out, &errb)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("produce took %v after cancel, want prompt return", took)
	}
	var rep produceReport
	if code != 1 || json.Unmarshal(out.Bytes(), &rep) != nil || rep.Produced != 0 || !strings.Contains(errb.String(), "stopped after 0 of 20 rows") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, a report of 0 rows and the stop named", code, out.String(), errb.String())
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
	if isTerminal(f) {
		t.Errorf("isTerminal(%s) = true, want false", os.DevNull)
	}
	if newProgress(f, "produce", 1).tty {
		t.Errorf("progress on %s draws a bar, want lines", os.DevNull)
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("isTerminal(bytes.Buffer) = true, want false")
	}
}
