package featsource

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// wakeTrain is the training topic of the tests without a broker.
const wakeTrain = "t.train"

// record is the features-topic message of a record for training event (part, off).
func record(t *testing.T, part int, off int64) stream.Message {
	t.Helper()
	r := featrec.Record{ID: "p", Topic: wakeTrain, Partition: part, Offset: off,
		Fingerprint: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", Features: []float64{1, 2, 3, 4}}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Topic: featrec.Topic, Partition: part, Offset: off, Value: b}
}

// source is a Source that is never Run: the tests hand it batches (handle) directly.
func source(t *testing.T, maxBytes int) *Source {
	t.Helper()
	s, err := New(Config{Train: wakeTrain, Topic: featrec.Topic, MaxBytes: maxBytes, Quiet: time.Minute,
		Applied: func(string, int) (int64, bool, error) { return 0, false, nil },
		Kafka:   stream.Config{Brokers: []string{"127.0.0.1:1"}}, Faults: fault.NewTracker(zerolog.Nop(), nil), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lookup runs s.Lookup for (part, off) with a minute's patience and sends how long it
// took and whether it got a record.
func lookup(ctx context.Context, s *Source, part int, off int64, done chan<- time.Duration, got chan<- bool) {
	start := time.Now()
	res := make([][]stream.Message, 1)
	s.Lookup(ctx, time.Minute, []ingest.FeatureRequest{{Topic: wakeTrain, Partition: part, Offset: off, ID: "p"}}, res)
	done <- time.Since(start)
	got <- len(res[0]) == 1
}

// TestLookupWokenByBatch: a Lookup waiting for a record returns as soon as the batch
// holding it is filed, with the record, not at its deadline.
func TestLookupWokenByBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := source(t, 0)
	done, got := make(chan time.Duration, 1), make(chan bool, 1)
	go lookup(ctx, s, 1, 7, done, got)
	time.Sleep(50 * time.Millisecond) // the Lookup waits
	if err := s.handle(ctx, []stream.Message{record(t, 1, 5), record(t, 1, 6), record(t, 1, 7), record(t, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	if el, ok := <-done, <-got; el > 10*time.Second || !ok {
		t.Fatalf("Lookup returned after %v (record: %v); want it woken by the batch with the record", el, ok)
	}
	if st := s.Stats(); st.Filed != 4 || st.Taken != 1 || st.Held != 1 {
		t.Errorf("stats %+v: want 4 filed, 1 taken, 1 held (6 and 5 passed, 2/3 kept)", st)
	}
}

// TestLookupWokenWhileFull: a batch that fills the Source waits for room in the middle;
// the Lookup waiting for a record filed earlier in that batch is woken then (not at the
// batch's end, which waits for that Lookup), takes it, and so lets the batch finish.
func TestLookupWokenWhileFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := len(record(t, 0, 1).Value)
	s := source(t, 2*one)
	done, got := make(chan time.Duration, 1), make(chan bool, 1)
	go lookup(ctx, s, 0, 1, done, got)
	time.Sleep(50 * time.Millisecond)
	handled := make(chan error, 1)
	go func() { handled <- s.handle(ctx, []stream.Message{record(t, 0, 1), record(t, 0, 2), record(t, 0, 3)}) }()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the batch still waits for room after 10 s: the Lookup that would free it was not woken")
	}
	if el, ok := <-done, <-got; !ok {
		t.Fatalf("Lookup returned after %v without its record", el)
	}
	if st := s.Stats(); st.Filed != 3 || st.Taken != 1 || st.Held != 2 {
		t.Errorf("stats %+v: want 3 filed, 1 taken, 2 held", st)
	}
}

// TestFullPartitionWaitsAlone: the buffer is shared out per training partition. A
// partition whose share is full waits for room on its own goroutine, while another
// partition's records are filed and handed to the Lookup that waits for them at once
// (with one bound for all partitions, that Lookup waited for its deadline: the full
// partition held the room).
func TestFullPartitionWaitsAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := len(record(t, 0, 1).Value)
	s := source(t, 4*one)
	s.share = 2 * one // two partitions read, as Run sets it
	full := make(chan error, 1)
	go func() { full <- s.handle(ctx, []stream.Message{record(t, 0, 1), record(t, 0, 2), record(t, 0, 3)}) }()
	for s.Stats().Filed < 2 { // partition 0 is full and its third record waits
		time.Sleep(5 * time.Millisecond)
	}
	done, got := make(chan time.Duration, 1), make(chan bool, 1)
	go lookup(ctx, s, 1, 2, done, got)
	if err := s.handle(ctx, []stream.Message{record(t, 1, 1), record(t, 1, 2)}); err != nil {
		t.Fatal(err)
	}
	if el, ok := <-done, <-got; el > 10*time.Second || !ok {
		t.Fatalf("Lookup of partition 1 returned after %v (record: %v); want it served while partition 0 waits for room", el, ok)
	}
	select {
	case err := <-full:
		t.Fatalf("partition 0's batch returned (%v) while its share was full", err)
	default:
	}
	// The Lookup of partition 0's next event takes its record, which makes room for
	// the third.
	done0, got0 := make(chan time.Duration, 1), make(chan bool, 1)
	go lookup(ctx, s, 0, 1, done0, got0)
	if err := <-full; err != nil {
		t.Fatal(err)
	}
	if el, ok := <-done0, <-got0; !ok {
		t.Fatalf("Lookup of partition 0 returned after %v without its record", el)
	}
}

// TestLookupPatience: Lookup waits for a batch's records as long as they keep coming,
// each within the patience of the one before, even when all of them take longer than
// the patience (a slow backbone's featurizer); once none comes for the patience it
// returns with what it has.
func TestLookupPatience(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const patience, gap = 2 * time.Second, 800 * time.Millisecond
	s := source(t, 0)
	want := []ingest.FeatureRequest{{Topic: wakeTrain, Partition: 0, Offset: 1, ID: "p"},
		{Topic: wakeTrain, Partition: 0, Offset: 2, ID: "p"}, {Topic: wakeTrain, Partition: 0, Offset: 3, ID: "p"},
		{Topic: wakeTrain, Partition: 0, Offset: 4, ID: "p"}}
	got := make([][]stream.Message, len(want))
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		s.Lookup(ctx, patience, want, got)
		done <- time.Since(start)
	}()
	for off := int64(1); off <= 3; off++ { // 2.4 s in all, each record 0.8 s after the last
		time.Sleep(gap)
		if err := s.handle(ctx, []stream.Message{record(t, 0, off)}); err != nil {
			t.Fatal(err)
		}
	}
	el := <-done // the fourth never comes
	for i := range 3 {
		if len(got[i]) != 1 {
			t.Fatalf("record %d of 3 not handed over (Lookup returned after %v): the wait ended while records still came", i+1, el)
		}
	}
	if len(got[3]) != 0 || el < 3*gap+patience-100*time.Millisecond || el > 3*gap+patience+5*time.Second {
		t.Fatalf("Lookup returned after %v with %d records of offset 4; want about %v after the call (the patience after the last record)",
			el, len(got[3]), 3*gap+patience)
	}
}
