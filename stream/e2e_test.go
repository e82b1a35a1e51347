package stream_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// outboxAdapter is how the daemon hands a *storage.Store to a Publisher:
// storage.OutboxEntry and stream.OutboxEntry have the same fields, so each
// entry converts directly. failAcks makes the first n Acks fail after the
// write went out, as a crash between publish and ack would.
type outboxAdapter struct {
	s        *storage.Store
	failAcks atomic.Int32
}

var errInjected = errors.New("injected ack failure")

func (a *outboxAdapter) Pending(limit int) ([]stream.OutboxEntry, error) {
	es, err := a.s.Pending(limit)
	if err != nil {
		return nil, err
	}
	out := make([]stream.OutboxEntry, len(es))
	for i, e := range es {
		out[i] = stream.OutboxEntry{Seq: e.Seq, Topic: e.Topic, Key: e.Key, Value: e.Value}
	}
	return out, nil
}

func (a *outboxAdapter) Ack(seqs ...uint64) error {
	if a.failAcks.Add(-1) >= 0 {
		return errInjected
	}
	return a.s.Ack(seqs...)
}

// TestEndToEndStorage runs the daemon's processing shape against a real
// broker and a real bbolt file: read train events from offsets stored in
// bbolt, apply each batch (points, offsets, outbox entries) in one
// transaction, publish the outbox, and read the outputs back. The reader
// is stopped part-way and restarted, and the publisher fails once between
// write and ack. Checked: every good event applied exactly once, every
// poison event dead-lettered exactly once, every output delivered at least
// once, and re-sent outputs identical to their first copy.
func TestEndToEndStorage(t *testing.T) {
	const in, out, dlq = "e.train", "e.out", "e.dlq"
	const n, dim = 120, 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3, Topics: []string{in, out, dlq}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kcfg := stream.Config{Brokers: []string{b.Addr()}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kcfg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lim := stream.Limits{InputDim: dim}

	var inputs []stream.Message
	poison := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("p%03d", i)
		if i%17 == 5 {
			poison[id] = true
			inputs = append(inputs, stream.Message{Topic: in, Key: []byte(id), Value: fmt.Appendf(nil, `{"v":1,"op":"upsert","id":%q,"x":[1]}`, id)})
			continue
		}
		label := int64(i % 10)
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: []float64{float64(i), 1, 2, 3}, Label: &label}, lim)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, stream.Message{Topic: in, Key: []byte(id), Value: v})
	}
	if err := w.Write(ctx, inputs...); err != nil {
		t.Fatal(err)
	}

	st, err := storage.Open(filepath.Join(t.TempDir(), "cairn.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box := &outboxAdapter{s: st}
	box.failAcks.Store(1)

	start := func(topic string, p int) (int64, bool, error) {
		var off int64
		var ok bool
		err := st.View(func(tx *storage.ReadTx) error {
			var err error
			off, ok, err = tx.Offset(topic, int32(p))
			return err
		})
		return off, ok, err
	}
	var applied atomic.Int64
	errStop := errors.New("stop reader")
	handle := func(_ context.Context, batch []stream.Message) error {
		if applied.Load() >= n/2 {
			return errStop // first run only: "crash" with half applied
		}
		return st.Apply(func(tx *storage.Tx) error {
			for _, m := range batch {
				ev, err := stream.DecodeTrain(m.Value, lim)
				if err != nil {
					dm, derr := stream.DeadLetterMessage(dlq, m, err, true)
					if derr != nil {
						return derr
					}
					if _, err := tx.Enqueue(dm.Topic, dm.Key, dm.Value); err != nil {
						return err
					}
				} else {
					if _, had, err := tx.Point(ev.ID); err != nil || had {
						return fmt.Errorf("point %s applied twice (err %v)", ev.ID, err)
					}
					if err := tx.PutPoint(storage.Point{ID: ev.ID, X: ev.X, HasLabel: true, Label: *ev.Label}); err != nil {
						return err
					}
					if _, err := tx.Enqueue(out, []byte(ev.ID), fmt.Appendf(nil, `{"v":1,"applied":%q,"offset":%d}`, ev.ID, m.Offset)); err != nil {
						return err
					}
				}
				if err := tx.SetOffset(m.Topic, int32(m.Partition), m.Offset); err != nil {
					return err
				}
				applied.Add(1)
			}
			return nil
		})
	}
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: kcfg, Topics: []string{in}, Start: start, MaxBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, handle); !errors.Is(err, errStop) {
		t.Fatalf("first run: %v, want errStop", err)
	}
	firstRun := applied.Load()

	// The publisher's first round fails on its ack; its entries stay in the outbox,
	// the publisher retries (it never gives up) and the retry re-sends them.
	var sawInjected atomic.Bool
	pub, err := stream.NewPublisher(w, box, stream.PublisherConfig{Batch: 16, Ready: st.OutboxReady(), Poll: 20 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, OnError: func(err error, failures int, _ time.Duration) {
			if errors.Is(err, errInjected) && failures == 1 {
				sawInjected.Store(true)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	var pubErr error
	go func() { defer wg.Done(); pubErr = pub.Run(pctx) }()

	// Second reader run: only the rest of the input, no handler stop.
	applied.Store(-1 << 40)
	rctx, rcancel := context.WithCancel(ctx)
	var rerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rerr = r.Run(rctx, handle)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for applied.Load()-(-1<<40) < n-firstRun && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rcancel()
	// Wait for the outbox to drain.
	for time.Now().Before(deadline) {
		es, err := st.Pending(0)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pcancel()
	wg.Wait()
	if rerr != nil || pubErr != nil {
		t.Fatalf("second runs: reader %v, publisher %v", rerr, pubErr)
	}
	if !sawInjected.Load() {
		t.Errorf("the injected ack failure was not reported to OnError")
	}
	if s := pub.State(); s.Failing || s.Retries != 1 {
		t.Errorf("publisher state after recovery %+v, want not failing after 1 retry", s)
	}
	if got := applied.Load() - (-1 << 40) + firstRun; got != n {
		t.Errorf("applied %d events over two runs, want %d", got, n)
	}

	var points int
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		points, err = tx.PointCount()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := n - len(poison); points != want {
		t.Errorf("stored %d points, want %d", points, want)
	}

	// Read both output topics back from the beginning.
	read := func(topic string, want int) map[string][]string {
		got := map[string][]string{}
		var mu sync.Mutex
		count := 0
		rr, err := stream.NewReader(stream.ReaderConfig{Kafka: kcfg, Topics: []string{topic}, Start: func(string, int) (int64, bool, error) { return 0, false, nil }})
		if err != nil {
			t.Fatal(err)
		}
		c, cc := context.WithTimeout(ctx, 800*time.Millisecond) // long enough to see duplicates
		defer cc()
		if err := rr.Run(c, func(_ context.Context, batch []stream.Message) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range batch {
				got[string(m.Key)] = append(got[string(m.Key)], string(m.Value))
				count++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if count < want {
			t.Errorf("topic %s: %d messages, want at least %d", topic, count, want)
		}
		return got
	}
	outs := read(out, n-len(poison))
	for i := range n {
		id := fmt.Sprintf("p%03d", i)
		vals := outs[id]
		if poison[id] {
			if len(vals) != 0 {
				t.Errorf("poison %s produced output %v", id, vals)
			}
			continue
		}
		if len(vals) == 0 {
			t.Errorf("output for %s lost", id)
		}
		for _, v := range vals[1:] {
			if v != vals[0] {
				t.Errorf("output for %s re-sent with a different value: %q vs %q", id, v, vals[0])
			}
		}
	}
	dead := read(dlq, len(poison))
	nd := 0
	for _, vs := range dead {
		nd += len(vs)
	}
	if nd < len(poison) {
		t.Errorf("dead letters: %d, want %d", nd, len(poison))
	}
}
