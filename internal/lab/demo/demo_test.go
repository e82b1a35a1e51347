package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/stream"
)

// smallConfig is a daemon small enough for a test under -race (the daemon package's
// e2e configuration): mlp:784-32-10, h = 2, s = 128, m = 16 per view, short fits, quick
// idle refits; broker and HTTP on free ports.
func smallConfig() config.Config {
	c := config.Default()
	c.HTTP = "127.0.0.1:0"
	c.Kafka.EmbeddedBroker = "127.0.0.1:0"
	c.Kafka.Partitions = 2
	c.Model = config.Backbone{Arch: "mlp:784-32-10", Seed: 3, ViewSeed: 3, Untrained: true}
	c.Sketch = config.Sketch{H: 2, S: 128}
	c.Pool.M = 16
	c.Fit.K, c.Fit.Epochs, c.Fit.Batch, c.Fit.Fits = 16, 3, 64, 2
	c.Refit.Idle = 300 * time.Millisecond
	c.Refit.DeleteDebounce = 100 * time.Millisecond
	c.Refit.MinPoints = 32
	c.Audit = config.Audit{Random: 10, Reference: 100, Test: 30}
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// TestRun runs the demo end to end on MNIST with a small daemon and checks the
// stream it prints: the stages in order, attributions for every query naming
// landmarks, an audit that chains from the zero hash and names the deleted top-1
// landmark of the first answer, a repeated first query without it, and a summary;
// and that the temporary data directory is gone afterwards.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	const n, queries = 120, 2
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr lockedBuffer
	err := Run(ctx, Options{Config: smallConfig(), Data: "mnist", N: n, Queries: queries, Log: zerolog.Nop(), Stderr: &stderr}, &out)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	// The client's readers stop before the broker: no reader reports the stopped
	// broker's refused connections.
	if e := stderr.String(); strings.Contains(e, "connection refused") {
		t.Errorf("stderr reports refused connections:\n%s", e)
	}
	var lines []lineIn
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l lineIn
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	var events []string
	for _, l := range lines {
		events = append(events, l.Event)
	}
	want := []string{"status", "status", "status", "attribution", "attribution", "audit", "attribution", "summary"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	var atts []stream.Attribution
	for _, i := range []int{3, 4, 6} {
		var a stream.Attribution
		if err := json.Unmarshal(lines[i].Data, &a); err != nil || a.Request == "" || len(a.TopK) == 0 || a.Model == 0 {
			t.Fatalf("line %d: attribution %s (%v): want a request, a model and landmarks", i, lines[i].Data, err)
		}
		atts = append(atts, a)
	}
	if lines[3].Query == nil || lines[3].Query.ID != "mnist/train/000000" {
		t.Errorf("first query %+v: want the stored id mnist/train/000000", lines[3].Query)
	}
	if lines[4].Query == nil || lines[4].Query.TestRow == nil || *lines[4].Query.TestRow != 0 {
		t.Errorf("second query %+v: want test row 0", lines[4].Query)
	}
	var audit stream.Audit
	if err := json.Unmarshal(lines[5].Data, &audit); err != nil {
		t.Fatal(err)
	}
	victim := atts[0].TopK[0].ID
	if audit.ID != victim || lines[5].Deleted != victim || audit.Seq != 1 || audit.PrevHash != strings.Repeat("0", 64) || !audit.Known {
		t.Errorf("audit %s: want seq 1 from the zero hash deleting the stored point %s", lines[5].Data, victim)
	}
	// Under the default gradient ranking the top-1 is any stored point: its audit measures
	// an encoder effect only when it was a landmark, and says so otherwise.
	if atts[0].Score != config.Default().Query.Score || audit.WasLandmark != (audit.Percentile >= 0) {
		t.Errorf("first answer ranked by %q; audit was_landmark %v with percentile %v", atts[0].Score, audit.WasLandmark, audit.Percentile)
	}
	if rep := client.VerifyMessages([]stream.Message{{Topic: "demo", Value: lines[5].Data}}, nil, nil); !rep.OK {
		t.Errorf("the demo's audit does not verify: %s", rep.Reason)
	}
	for _, s := range atts[2].TopK {
		if s.ID == victim {
			t.Errorf("repeated query names the deleted id %s: %s", victim, lines[6].Data)
		}
	}
	if lines[6].RepeatOf != 1 || lines[6].DeletedAbsent == nil || !*lines[6].DeletedAbsent {
		t.Errorf("repeated query line: repeat_of %d, deleted_absent %v; want 1, true", lines[6].RepeatOf, lines[6].DeletedAbsent)
	}
	if atts[2].Model <= atts[0].Model {
		t.Errorf("repeated query on model %d, first on %d: want a newer model after the deletion", atts[2].Model, atts[0].Model)
	}
	var sum Summary
	if err := json.Unmarshal(lines[7].Data, &sum); err != nil || sum.Points != n || sum.Deleted != victim || !sum.DeletedGone || sum.Kept {
		t.Errorf("summary %s (%v): want %d points, deleted %s absent after, temp dir not kept", lines[7].Data, err, n, victim)
	}
	if _, err := os.Stat(sum.DataDir); !os.IsNotExist(err) {
		t.Errorf("temporary data dir %s: stat error %v, want it removed", sum.DataDir, err)
	}
	if !strings.HasPrefix(filepath.Base(sum.DataDir), "cairn-demo-") {
		t.Errorf("data dir %s: want a cairn-demo- temporary directory", sum.DataDir)
	}
}

// lineIn is Line as a reader of the output decodes it.
type lineIn struct {
	Event         string          `json:"event"`
	Query         *Query          `json:"query"`
	RepeatOf      int             `json:"repeat_of"`
	Deleted       string          `json:"deleted"`
	DeletedAbsent *bool           `json:"deleted_absent"`
	Data          json.RawMessage `json:"data"`
}

// lockedBuffer is a bytes.Buffer for writers on several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
