package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/lab/bench"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// benchModel reads the served model through GET /model, as `cairnctl model export
// --http` does: the reference sees only what a third party sees.
func benchModel(ctx context.Context, addr string) (*daemon.ModelExport, error) {
	body, err := fetchModelExport(ctx, addr, 0)
	if err != nil {
		return nil, err
	}
	var m daemon.ModelExport
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("GET /model: %w", err)
	}
	return &m, nil
}

// openLoad sends rate queries per second for dur on one writer goroutine, joined before
// it returns, and collects the attributions from a tail of the query and attribution
// topics. The i-th query is query(i) with the request id prefix+i; no other request id
// may start with prefix.
func openLoad(ctx context.Context, c client, w *stream.Writer, lim stream.Limits, query func(i int) stream.QueryEvent, rate float64, dur time.Duration, prefix string, stderr io.Writer) (bench.LoadStats, error) {
	ls := bench.LoadStats{Rate: rate}
	t, err := newTail(ctx, c.kc, stderr, c.topics.Queries, c.topics.Attributions)
	if err != nil {
		return ls, err
	}
	defer t.Close()
	n := int(rate * dur.Seconds())
	var sendErr error
	var lagMax time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t0 := time.Now()
		for i := range n {
			at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					sendErr = ctx.Err()
					return
				}
			}
			lagMax = max(lagMax, time.Since(at))
			q := query(i)
			q.Request = prefix + strconv.Itoa(i)
			if _, err := c.sendQuery(ctx, w, q, lim); err != nil {
				sendErr = err
				return
			}
		}
	}()
	pairs := bench.NewLoadPairs(prefix, c.topics.Queries)
	deadline, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	for len(pairs.Latencies()) < n {
		m, err := t.next(deadline)
		if err != nil {
			break
		}
		pairs.Add(m)
	}
	lat := pairs.Latencies()
	wg.Wait()
	if sendErr != nil {
		return ls, sendErr
	}
	ls.Sent, ls.Answered = n, len(lat)
	ls.SendLagMax = lagMax.Seconds() * 1e3
	if len(lat) > 0 {
		ls.P50Ms, ls.P99Ms, ls.MaxMs = percentile(lat, 0.5), percentile(lat, 0.99), slices.Max(lat)
	}
	return ls, nil
}

// benchBackbone is the daemon's backbone built from its configuration, as the daemon
// builds it, for the reference.
func benchBackbone(h *harness) (entk.Backbone, error) {
	f, err := pipeline.NewFeatures(h.cfg.Model, h.cfg.Sketch, "")
	if err != nil {
		return nil, err
	}
	return f.Backbone(), nil
}
