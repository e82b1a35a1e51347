package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// TestRidesStorageFaults: while every commit, ack and erasure of the state file fails
// with ENOSPC (storage.Options.Faults), the daemon keeps running and /readyz names the
// failing parts; once the disk "has space" again it catches up on everything sent
// meanwhile (upserts, deletions, queries), with one audit per deletion in a chain that
// verifies, and its final state equals that of a daemon fed the same messages without
// faults (ingest.StateHash): nothing lost, nothing applied twice.
func TestRidesStorageFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons on MNIST")
	}
	const first, second = 120, 60
	set, err := dataset.Open("mnist", "train", first+second)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	rows := make([]int, first+second)
	for i := range rows {
		rows[i] = i
	}
	deleted := []string{set.IDs[3], set.IDs[first+5]}
	run := func(faulty bool) string {
		dir := t.TempDir()
		cfg := e2eConfig(dir)
		tp := cfg.Kafka.Topics
		var failing atomic.Bool
		var injected atomic.Int64
		r := startDaemonWith(t, cfg, func(d *Daemon) {
			d.storeFaults = func(site string) error {
				if failing.Load() {
					injected.Add(1)
					return fmt.Errorf("injected at %s: %w", site, syscall.ENOSPC)
				}
				return nil
			}
		})
		msgs := upserts(t, tp.Train, set, rows)
		produceMsgs(t, r.d.Brokers(), msgs[:first])
		waitFor(t, "the first model", 120*time.Second, func() bool {
			s := r.d.Status()
			return s.Model > 0 && s.ModelPoints == first && !s.RefitRunning
		})
		failing.Store(faulty)
		later := slices.Clone(msgs[first:])
		for i, id := range deleted {
			later = append(later, deleteMsg(t, tp.Train, id, fmt.Sprintf("del-%d", i)))
		}
		produceMsgs(t, r.d.Brokers(), later)
		var queries []stream.Message
		for i := range 4 {
			queries = append(queries, queryMsg(t, tp.Queries, stream.QueryEvent{Request: fmt.Sprintf("q%d", i), ID: set.IDs[10+i], K: 5}, set.D))
		}
		produceMsgs(t, r.d.Brokers(), queries)
		if faulty {
			waitFor(t, "/readyz to report the failing commits", 30*time.Second, func() bool {
				err := r.d.readyErr()
				return err != nil && strings.Contains(err.Error(), "no space left on device")
			})
			time.Sleep(*diskFull) // retries pile up; the daemon must stay up
			select {
			case err := <-r.done:
				t.Fatalf("the daemon stopped under storage faults: %v", err)
			default:
			}
			if injected.Load() < 3 {
				t.Errorf("only %d faults injected", injected.Load())
			}
			failing.Store(false)
		}
		cleared := time.Now()
		final := first + second - len(deleted)
		waitFor(t, "the model on every surviving point", 180*time.Second, func() bool {
			s := r.d.Status()
			return s.Model > 0 && s.ModelPoints == final && s.Points == final && !s.RefitRunning && s.PendingDeletions == 0
		})
		if faulty {
			t.Logf("disk full for %v (%d writes refused); caught up %v after it cleared (%d points, %d deletions audited, %d queries answered)",
				*diskFull, injected.Load(), time.Since(cleared).Round(time.Millisecond), final, len(deleted), len(queries))
		}
		waitFor(t, "readiness after the faults", 30*time.Second, func() bool { return r.d.readyErr() == nil })
		waitFor(t, "an audit per deletion and an answer per query", 30*time.Second, func() bool {
			return len(keyed[stream.Audit](t, r, tp.Audits)) == len(deleted) && len(keyed[stream.Attribution](t, r, tp.Attributions)) == len(queries)
		})
		if dl := r.messages(tp.DLQ); len(dl) != 0 {
			t.Errorf("%d dead letters, want none", len(dl))
		}
		r.stop(t)
		st, err := storage.Open(filepath.Join(dir, StateFile), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.VerifyAudit(); err != nil {
			t.Errorf("audit chain: %v", err)
		}
		var audits int
		if err := st.View(func(tx *storage.ReadTx) error {
			return tx.ForEachAudit(1, func(storage.AuditRecord) error { audits++; return nil })
		}); err != nil || audits != len(deleted) {
			t.Errorf("%d audit records (%v), want one per deletion", audits, err)
		}
		h, err := ingest.StateHash(cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	clean := run(false)
	if faulty := run(true); faulty != clean {
		t.Errorf("state hash after the faults %s, without faults %s", faulty, clean)
	}
}

var (
	outage   = flag.Duration("outage", 6*time.Second, "broker outage of TestRidesBrokerOutage")
	diskFull = flag.Duration("diskfull", 2*time.Second, "disk-full window of TestRidesStorageFaults")
)

// TestRidesBrokerOutage: a daemon on an external broker keeps running while the broker
// is down for -outage (default 6 s) in the middle of ingesting, with outputs pending;
// /readyz reports the broker; once a broker is back on the same address with the same
// data, every upsert is applied once, every query answered, and the model covers every
// point. The time from the broker's return to that state is logged (the drain time).
func TestRidesBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("daemon on MNIST through a broker outage")
	}
	const first, second = 120, 120
	set, err := dataset.Open("mnist", "train", first+second)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	dir := t.TempDir()
	cfg := e2eConfig(dir)
	tp := cfg.Kafka.Topics
	bcfg := stream.BrokerConfig{Addr: "127.0.0.1:0", Partitions: cfg.Kafka.Partitions, DataDir: filepath.Join(t.TempDir(), "kafka"),
		Topics: []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}, TopicConfigs: TopicConfigs(cfg)}
	ctx := context.Background()
	b, err := stream.StartBroker(ctx, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	bcfg.Addr = b.Addr()
	cfg.Kafka.Brokers = []string{b.Addr()}
	r := startDaemon(t, cfg)
	rows := make([]int, first+second)
	for i := range rows {
		rows[i] = i
	}
	msgs := upserts(t, tp.Train, set, rows)
	produceMsgs(t, r.d.Brokers(), msgs[:first])
	waitFor(t, "the first model", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && s.ModelPoints == first && !s.RefitRunning
	})
	var queries []stream.Message
	for i := range 4 {
		queries = append(queries, queryMsg(t, tp.Queries, stream.QueryEvent{Request: fmt.Sprintf("q%d", i), ID: set.IDs[i], K: 5}, set.D))
	}
	produceMsgs(t, r.d.Brokers(), slices.Concat(msgs[first:], queries))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	sawBroker := false
	for time.Since(down) < *outage {
		if err := r.d.readyErr(); err != nil && strings.Contains(err.Error(), "broker") {
			sawBroker = true
		}
		select {
		case err := <-r.done:
			t.Fatalf("the daemon stopped during the broker outage: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if *outage > fault.BrokerGrace+time.Second && !sawBroker {
		t.Errorf("/readyz never reported the broker during a %v outage", *outage)
	}
	var b2 *stream.Broker
	for range 100 {
		if b2, err = stream.StartBroker(ctx, bcfg); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The daemon stops (its final outbox drain needs the broker) before the broker:
	// a deferred Close would run before startDaemon's cleanup stops it.
	defer func() { r.stop(t); b2.Close() }()
	back := time.Now()
	total := first + second
	waitFor(t, "catching up after the outage", 180*time.Second, func() bool {
		s := r.d.Status()
		return s.Points == total && s.ModelPoints == total && !s.RefitRunning &&
			len(keyed[stream.Attribution](t, r, tp.Attributions)) == len(queries) && r.d.readyErr() == nil
	})
	t.Logf("broker down %v; caught up %v after it returned (%d points, %d answers)", back.Sub(down).Round(time.Millisecond),
		time.Since(back).Round(time.Millisecond), total, len(queries))
	if s := r.d.Status(); s.Ingest.Upserts != uint64(total) || s.Ingest.DeadLetters != 0 {
		t.Errorf("ingest stats %+v: want %d upserts applied once and no dead letters", s.Ingest, total)
	}
}

// TestStartsWhileBrokerDown: a daemon started while its external broker is down waits
// for it (it used to exit at once with "create topics … Broker Not Available") and
// serves once the broker comes up.
func TestStartsWhileBrokerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := e2eConfig(t.TempDir())
	cfg.Kafka.Brokers = []string{addr}
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Run returned while the broker was down: %v", err)
	case <-d.Ready():
		t.Fatal("ready without a broker")
	case <-time.After(3 * time.Second):
	}
	if err := d.faults.Err(); err == nil || !strings.Contains(err.Error(), "broker") {
		t.Errorf("faults while waiting: %v, want the broker named", err)
	}
	tp := cfg.Kafka.Topics
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: addr, Partitions: cfg.Kafka.Partitions,
		Topics: []string{tp.Train, tp.Queries, tp.Attributions, tp.Audits, tp.DLQ, tp.Status}, TopicConfigs: TopicConfigs(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	select {
	case err := <-done:
		t.Fatalf("Run returned: %v", err)
	case <-d.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("not ready 30 s after the broker came up")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestOutboxBackPressure: while the outbox holds limits.max_outbox entries, waitOutbox
// blocks (the readers pause) and /readyz names the outbox; it returns once the
// publisher has drained it below the bound, and returns ctx's error if ctx ends first.
func TestOutboxBackPressure(t *testing.T) {
	cfg := e2eConfig(t.TempDir())
	cfg.Limits.MaxOutbox = 3
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.store, err = d.openState(); err != nil {
		t.Fatal(err)
	}
	defer d.store.Close()
	d.leading.Store(true) // back-pressure is the leader's: a standby's outbox waits for its leadership
	var seqs []uint64
	for range 3 {
		if err := d.store.Apply(func(tx *storage.Tx) error {
			s, err := tx.Enqueue("out", []byte("k"), []byte("v"))
			seqs = append(seqs, s)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = d.waitOutbox(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitOutbox with a full outbox: %v, want it to block until ctx ends", err)
	}
	if ferr := d.faults.Err(); ferr == nil || !strings.Contains(ferr.Error(), "limits.max_outbox is 3") {
		t.Errorf("faults %v, want the outbox named", ferr)
	}
	done := make(chan error, 1)
	go func() { done <- d.waitOutbox(context.Background()) }()
	time.Sleep(150 * time.Millisecond)
	if err := d.store.Ack(seqs[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("waitOutbox after the drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitOutbox still blocked with 2 of 3 entries left")
	}
	if ferr := d.faults.Err(); ferr != nil {
		t.Errorf("fault not cleared: %v", ferr)
	}
	if got := d.outbox.Load(); got != 2 {
		t.Errorf("outbox length %d, want 2", got)
	}
}
