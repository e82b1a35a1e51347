package ingest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/stream"
)

// aheadEvents is a training sequence on two partitions with every kind of message the
// ingest distinguishes: upserts, replacements, deletes of stored and unknown ids, a
// re-upsert after a delete, and poison messages (one whose features overflow, found
// only after featurization).
func aheadEvents(t *testing.T, topic string, dim int) []stream.Message {
	g := newGen(t, 11, dim)
	var evs []event
	for i := range 60 {
		evs = append(evs, g.upsert(id(i)))
		switch i % 13 {
		case 4:
			evs = append(evs, g.del(id(i/2)))
		case 7:
			evs = append(evs, g.upsert(id(i-3)))
		case 9:
			evs = append(evs, g.del(fmt.Sprintf("never-%d", i)))
		}
		if i == 30 {
			evs = append(evs, poisons("a")...)
		}
	}
	evs = append(evs, g.upsert(id(2)), g.del(id(59)))
	ms := msgs(topic, evs)
	for i := range ms {
		ms[i].Partition, ms[i].Offset = i%2, int64(i/2)
	}
	return ms
}

// applyCut applies ms cut into batches of size. With ahead, a second goroutine calls
// Ahead on batch k+1 while batch k is applied and hands it over only after, as the
// training reader does (stream.ReaderConfig.Ahead); it is joined before applyCut
// returns. It returns the summed counts.
func applyCut(t *testing.T, in *State, ms []stream.Message, size int, ahead bool) [5]int {
	ctx := context.Background()
	var sum [5]int
	apply := func(b []stream.Message) {
		res, err := in.Apply(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range counts(res) {
			sum[i] += c
		}
	}
	var cuts [][]stream.Message
	for lo := 0; lo < len(ms); lo += size {
		cuts = append(cuts, ms[lo:min(lo+size, len(ms))])
	}
	if !ahead {
		for _, b := range cuts {
			apply(b)
		}
		return sum
	}
	next := make(chan []stream.Message)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(next)
		for _, b := range cuts {
			in.Ahead(ctx, b)
			next <- b
		}
	})
	for b := range next {
		apply(b)
	}
	wg.Wait()
	return sum
}

// TestAheadSameState: the state hash and the counts are the same bits whether batches
// were prepared ahead (Ahead, concurrently with the Apply before) or not, whatever the
// batch size and GOMAXPROCS, including re-deliveries of applied messages; and the
// prepared features are the ones applied (a prepared batch with other features changes
// the state, so the test can fail).
func TestAheadSameState(t *testing.T) {
	cfg := testConfig()
	ms := aheadEvents(t, cfg.Kafka.Topics.Train, 6)
	run := func(size int, ahead bool) (string, [5]int) {
		st := tempStore(t)
		in := newTestIngest(t, cfg, st)
		// Two thirds, then from one third on: the middle third is re-delivered (skipped,
		// prepared ahead or not), so prepared batches also mix applied and new messages.
		c := applyCut(t, in, ms[:2*len(ms)/3], size, ahead)
		r := applyCut(t, in, ms[len(ms)/3:], size, ahead)
		for i := range c {
			c[i] += r[i]
		}
		if ahead && in.Stats().Phases.Ahead <= 0 {
			t.Errorf("size %d: no batch was taken from Ahead", size)
		}
		h, err := StateHash(cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		return h, c
	}
	want, wantCounts := run(len(ms), false)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(procs)
		for _, size := range []int{1, 7, 64, len(ms)} {
			for _, ahead := range []bool{false, true} {
				if h, c := run(size, ahead); h != want || c != wantCounts {
					t.Errorf("GOMAXPROCS %d, batches of %d, ahead %v: hash %.12s counts %v; want %.12s, %v",
						procs, size, ahead, h, c, want, wantCounts)
				}
			}
		}
	}

	// The features Apply uses are the prepared ones: doubled, they change the state.
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	in.Ahead(context.Background(), ms)
	p := in.ahead.ready[0]
	for j := range p.feats {
		p.feats[j] *= 2
	}
	if _, err := in.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	if h, err := StateHash(cfg, st); err != nil || h == want {
		t.Errorf("prepared features doubled: hash %.12s, %v; want it to differ from %.12s", h, err, want)
	}
}

// TestAheadUnmatched: a batch prepared but never applied (the reader stopped) or
// prepared from other messages is not used: Apply computes what it needs, the state is
// the same, and at most aheadKept prepared batches are kept.
func TestAheadUnmatched(t *testing.T) {
	cfg := testConfig()
	ms := aheadEvents(t, cfg.Kafka.Topics.Train, 6)
	st := tempStore(t)
	in := newTestIngest(t, cfg, st)
	ctx := context.Background()
	in.Ahead(ctx, ms[:10])
	in.Ahead(ctx, ms[10:20])
	in.Ahead(ctx, ms[20:30])
	if n := len(in.ahead.ready); n != aheadKept {
		t.Errorf("%d prepared batches kept, want %d", n, aheadKept)
	}
	other := append([]stream.Message(nil), ms[10:20]...)
	other[3].Value = append([]byte(nil), ms[40].Value...) // the same coordinates, other bytes
	if p := in.ahead.take(other); p != nil {
		t.Error("a batch with other bytes took a prepared batch")
	}
	for lo := 0; lo < len(ms); lo += 5 { // other cuts than the prepared ones
		if _, err := in.Apply(ctx, ms[lo:min(lo+5, len(ms))]); err != nil {
			t.Fatal(err)
		}
	}
	if in.Stats().Phases.Ahead != 0 {
		t.Errorf("Phases.Ahead %v: a prepared batch was taken for other messages", in.Stats().Phases.Ahead)
	}
	ref := tempStore(t)
	applyCut(t, newTestIngest(t, cfg, ref), ms, len(ms), false)
	h1, err1 := StateHash(cfg, st)
	h2, err2 := StateHash(cfg, ref)
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Errorf("state hash %.12s (%v), want %.12s (%v)", h1, err1, h2, err2)
	}
}
