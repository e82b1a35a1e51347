package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// startBroker starts an embedded broker on a free loopback port.
func startBroker(t testing.TB, partitions int, topics ...string) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: partitions, Topics: topics})
	if err != nil {
		t.Fatalf("StartBroker: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newTestWriter(t testing.TB, addr string, mod func(*WriterConfig)) *Writer {
	t.Helper()
	cfg := WriterConfig{Kafka: Config{Brokers: []string{addr}}}
	if mod != nil {
		mod(&cfg)
	}
	w, err := NewWriter(cfg)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// collector is a Handler that records messages and can stop the reader
// after a count.
type collector struct {
	mu   sync.Mutex
	msgs []Message
	want int
	done chan struct{}
}

func newCollector(want int) *collector { return &collector{want: want, done: make(chan struct{})} }

func (c *collector) handle(_ context.Context, batch []Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, batch...)
	if len(c.msgs) >= c.want && c.want > 0 {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
	return nil
}

// runReader runs r until col has want messages or the timeout, then stops
// it and returns the collected messages.
func runReader(t *testing.T, r *Reader, col *collector, timeout time.Duration) []Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx, col.handle) }()
	select {
	case <-col.done:
	case err := <-errc:
		cancel()
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(timeout):
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	return slices.Clone(col.msgs)
}

// storedOffsets is a StartFunc over a map, standing in for bbolt.
type storedOffsets map[string]int64

func (s storedOffsets) start(topic string, partition int) (int64, bool, error) {
	v, ok := s[fmt.Sprintf("%s/%d", topic, partition)]
	return v, ok, nil
}

func msgKeyVal(topic string, i int) Message {
	return Message{Topic: topic, Key: fmt.Appendf(nil, "k%03d", i%7), Value: fmt.Appendf(nil, "v%05d", i)}
}

// checkPartitionOrder checks that, per partition, offsets strictly increase
// by one from the first seen, and that each key's values come in write order.
func checkPartitionOrder(t *testing.T, got []Message) {
	t.Helper()
	last := map[int]int64{}
	for _, m := range got {
		if prev, ok := last[m.Partition]; ok && m.Offset != prev+1 {
			t.Errorf("partition %d: offset %d after %d, want %d", m.Partition, m.Offset, prev, prev+1)
		}
		last[m.Partition] = m.Offset
	}
	lastVal := map[string]string{}
	for _, m := range got {
		k := string(m.Key)
		if prev, ok := lastVal[k]; ok && string(m.Value) <= prev {
			t.Errorf("key %s: value %s after %s, want increasing", k, m.Value, prev)
		}
		lastVal[k] = string(m.Value)
	}
}

func TestProduceConsumeInOrder(t *testing.T) {
	const topic, n = "t.order", 200
	b := startBroker(t, 3, topic)
	w := newTestWriter(t, b.Addr(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < n; i += 50 {
		var batch []Message
		for j := i; j < i+50; j++ {
			batch = append(batch, msgKeyVal(topic, j))
		}
		if err := w.Write(ctx, batch...); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(n), 15*time.Second)
	if len(got) != n {
		t.Fatalf("got %d messages, want %d", len(got), n)
	}
	checkPartitionOrder(t, got)
	seen := map[string]bool{}
	parts := map[string]int{}
	for _, m := range got {
		if seen[string(m.Value)] {
			t.Errorf("value %s delivered twice", m.Value)
		}
		seen[string(m.Value)] = true
		if p, ok := parts[string(m.Key)]; ok && p != m.Partition {
			t.Errorf("key %s on partitions %d and %d; want one partition per key", m.Key, p, m.Partition)
		}
		parts[string(m.Key)] = m.Partition
		if m.Offset < 0 || m.Topic != topic {
			t.Errorf("message %+v: bad coordinates", m)
		}
	}
}

// TestHeaders: record headers written with a message (a tombstone's included) come back
// with it from the Reader and from the Writer's OnWritten, in order; a message without
// headers reads back with none.
func TestHeaders(t *testing.T) {
	const topic = "t.headers"
	b := startBroker(t, 1, topic)
	var (
		mu      sync.Mutex
		written []Message
	)
	w := newTestWriter(t, b.Addr(), func(c *WriterConfig) {
		c.OnWritten = func(ms []Message) { mu.Lock(); written = append(written, ms...); mu.Unlock() }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := []Header{{Key: "cairn_version", Value: []byte("17")}, {Key: "b", Value: nil}}
	in := []Message{
		{Topic: topic, Key: []byte("a"), Value: []byte("v"), Headers: hs},
		{Topic: topic, Key: []byte("a"), Headers: hs[:1]},
		{Topic: topic, Key: []byte("c"), Value: []byte("w")},
	}
	if err := w.Write(ctx, in...); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(len(in)), 15*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for name, ms := range map[string][]Message{"read": got, "written": written} {
		if len(ms) != len(in) {
			t.Fatalf("%s %d messages, want %d", name, len(ms), len(in))
		}
		for i, m := range ms {
			if len(m.Headers) != len(in[i].Headers) {
				t.Fatalf("%s message %d: headers %+v, want %+v", name, i, m.Headers, in[i].Headers)
			}
			for j, h := range m.Headers {
				if h.Key != in[i].Headers[j].Key || string(h.Value) != string(in[i].Headers[j].Value) {
					t.Errorf("%s message %d header %d = %q: %q, want %q: %q", name, i, j, h.Key, h.Value, in[i].Headers[j].Key, in[i].Headers[j].Value)
				}
			}
		}
		if v, ok := ms[1].Header("cairn_version"); !ok || string(v) != "17" || ms[1].Value != nil {
			t.Errorf("%s tombstone: header %q %v, value %q; want 17 and a null value", name, v, ok, ms[1].Value)
		}
	}
}

// TestReaderResumesAfterStoredOffset stops a reader part-way, records the
// last offset handled per partition as the daemon would, and checks that a
// new reader delivers exactly the rest: nothing twice, nothing lost.
func TestReaderResumesAfterStoredOffset(t *testing.T) {
	const topic, n = "t.resume", 300
	b := startBroker(t, 2, topic)
	w := newTestWriter(t, b.Addr(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var all []Message
	for i := 0; i < n; i++ {
		all = append(all, msgKeyVal(topic, i))
	}
	if err := w.Write(ctx, all...); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: []string{b.Addr()}}
	stored := storedOffsets{}
	// First run: handle at most 100 messages, batch by batch, then fail
	// the next batch to stop; only handled batches update the offsets.
	handled := 0
	errStop := errors.New("stop")
	var first []Message
	r1, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, Start: stored.start, MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	err = r1.Run(ctx, func(_ context.Context, batch []Message) error {
		if handled >= 100 {
			return errStop
		}
		for _, m := range batch {
			first = append(first, m)
			stored[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] = m.Offset
			handled++
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("first Run = %v, want errStop", err)
	}
	r2, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, Start: stored.start})
	if err != nil {
		t.Fatal(err)
	}
	rest := runReader(t, r2, newCollector(n-len(first)), 15*time.Second)
	// Give a duplicate a chance to show: the collector stops at exactly
	// the expected count, so any duplicate would displace a missing value
	// and show up below as "twice" and "missing".
	got := append(slices.Clone(first), rest...)
	count := map[string]int{}
	for _, m := range got {
		count[string(m.Value)]++
	}
	for _, m := range all {
		if c := count[string(m.Value)]; c != 1 {
			t.Errorf("value %s delivered %d times, want 1", m.Value, c)
		}
	}
	if len(got) != n {
		t.Errorf("delivered %d in total, want %d", len(got), n)
	}
	// The resumed run starts on each partition right after the stored offset.
	firstOff := map[int]int64{}
	for _, m := range rest {
		if _, ok := firstOff[m.Partition]; !ok {
			firstOff[m.Partition] = m.Offset
		}
	}
	for p, off := range firstOff {
		want := int64(0)
		if s, ok := stored[fmt.Sprintf("%s/%d", topic, p)]; ok {
			want = s + 1
		}
		if off != want {
			t.Errorf("partition %d: resumed at %d, want %d", p, off, want)
		}
	}
}

// TestPoisonToDeadLetter sends a bad event between good ones and checks
// that it lands on the dead-letter topic with its reason and coordinates,
// and that the good events after it on the same partition are delivered.
func TestPoisonToDeadLetter(t *testing.T) {
	const in, dlq = "t.train", "t.dlq"
	b := startBroker(t, 1, in, dlq)
	w := newTestWriter(t, b.Addr(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lim := Limits{InputDim: 2}
	good := func(id string) Message {
		v, err := EncodeTrain(TrainEvent{Op: OpUpsert, ID: id, X: []float64{1, 2}}, lim)
		if err != nil {
			t.Fatal(err)
		}
		return Message{Topic: in, Key: []byte(id), Value: v}
	}
	poison := Message{Topic: in, Key: []byte("bad"), Value: []byte(`{"v":1,"op":"upsert","id":"bad","x":[1,2,3]}`)}
	if err := w.Write(ctx, good("a"), poison, good("b"), good("c")); err != nil {
		t.Fatal(err)
	}
	dl, err := NewDeadLetterWriter(w, dlq)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{in}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	col := newCollector(4)
	handle := func(ctx context.Context, batch []Message) error {
		for _, m := range batch {
			ev, err := DecodeTrain(m.Value, lim)
			if err != nil {
				if err := dl.Send(ctx, m, err); err != nil {
					return err
				}
				continue
			}
			ids = append(ids, ev.ID)
		}
		return col.handle(ctx, batch)
	}
	rctx, rcancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- r.Run(rctx, handle) }()
	select {
	case <-col.done:
	case <-time.After(15 * time.Second):
		t.Error("timed out waiting for 4 messages")
	}
	rcancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(ids, want) {
		t.Errorf("applied ids %v, want %v", ids, want)
	}
	dr, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{dlq}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, dr, newCollector(1), 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("dead letters: got %d, want 1", len(got))
	}
	dead, err := decodeDeadLetter(got[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if dead.Reason != ReasonWrongDim || dead.Topic != in || dead.Partition != 0 || dead.Offset != 1 ||
		string(dead.Raw) != string(poison.Value) || dead.RawLen != len(poison.Value) || dead.Truncated {
		t.Errorf("dead letter %+v: want reason %s, %s/0/1, raw = poison", dead, ReasonWrongDim, in)
	}
	if k := string(got[0].Key); k != in+"/0/1" {
		t.Errorf("dead letter key %q, want %q", k, in+"/0/1")
	}
}

// TestWriterRetriesAcrossBrokerRestart stops the broker, starts a Write,
// starts a new broker on the same address while the Write is retrying, and
// checks that the message lands; a second Write against a dead broker with
// few attempts must return ErrWriteFailed, never nil.
func TestWriterRetriesAcrossBrokerRestart(t *testing.T) {
	const topic = "t.restart"
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfgB := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic}, DataDir: dir}
	b1, err := StartBroker(ctx, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	addr := b1.Addr()
	w := newTestWriter(t, addr, func(c *WriterConfig) {
		c.Attempts = 100
		c.BackoffMin = 20 * time.Millisecond
		c.BackoffMax = 200 * time.Millisecond
		c.Timeout = 2 * time.Second
	})
	if err := w.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	b1.Close()

	errc := make(chan error, 1)
	go func() { errc <- w.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("during")}) }()
	time.Sleep(300 * time.Millisecond) // let a few attempts fail
	cfgB.Addr = addr
	b2, err := startOnAddr(ctx, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if err := <-errc; err != nil {
		t.Fatalf("Write across restart: %v", err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{addr}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(2), 10*time.Second)
	var vals []string
	for _, m := range got {
		vals = append(vals, string(m.Value))
	}
	if want := []string{"before", "during"}; !slices.Equal(vals, want) {
		t.Errorf("after restart read %v, want %v (persisted record kept, retried record landed once)", vals, want)
	}

	// With the broker gone for good, a bounded writer must fail loudly.
	b2.Close()
	w2 := newTestWriter(t, addr, func(c *WriterConfig) {
		c.Attempts = 3
		c.BackoffMin = 10 * time.Millisecond
		c.BackoffMax = 20 * time.Millisecond
		c.Timeout = 500 * time.Millisecond
	})
	err = w2.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("lost?")})
	if !errors.Is(err, ErrWriteFailed) {
		t.Errorf("Write to a dead broker = %v, want ErrWriteFailed", err)
	}
}

// startOnAddr retries StartBroker briefly: the old listener's port may take
// a moment to be released.
func startOnAddr(ctx context.Context, cfg BrokerConfig) (*Broker, error) {
	var err error
	for range 50 {
		var b *Broker
		b, err = StartBroker(ctx, cfg)
		if err == nil {
			return b, nil
		}
		var oe *net.OpError
		if !errors.As(err, &oe) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, err
}

func decodeDeadLetter(b []byte) (DeadLetter, error) {
	var d struct {
		V int `json:"v"`
		DeadLetter
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return DeadLetter{}, err
	}
	if d.V != 1 {
		return DeadLetter{}, fmt.Errorf("dead letter v=%d, want 1", d.V)
	}
	return d.DeadLetter, nil
}

// TestReaderRefusesOffsetAhead: a stored offset past the partition's end
// (the topic was re-created, as when an embedded broker without DataDir
// restarts) must stop the reader with ErrOffsetAhead rather than skip the
// new messages; a stored offset equal to the last message is fine.
func TestReaderRefusesOffsetAhead(t *testing.T) {
	const topic = "t.ahead"
	b := startBroker(t, 1, topic)
	w := newTestWriter(t, b.Addr(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Write(ctx, msgKeyVal(topic, 0), msgKeyVal(topic, 1)); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: []string{b.Addr()}}
	tests := []struct {
		stored int64
		ahead  bool
	}{{0, false}, {1, false}, {2, true}, {40, true}}
	for _, tt := range tests {
		r, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, Start: storedOffsets{topic + "/0": tt.stored}.start})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err = r.Run(rctx, func(context.Context, []Message) error { return nil })
		rcancel()
		if got := errors.Is(err, ErrOffsetAhead); got != tt.ahead {
			t.Errorf("stored %d: Run = %v, want ErrOffsetAhead: %v", tt.stored, err, tt.ahead)
		}
	}
}

// TestBrokerRestartWithoutDataDir: a memory-only broker restarted on the
// same address comes back with its topics (re-created on start) but
// without its records; the persistent case is covered by
// TestWriterRetriesAcrossBrokerRestart.
func TestBrokerRestartWithoutDataDir(t *testing.T) {
	const topic = "t.mem"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{topic}}
	b1, err := StartBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWriter(t, b1.Addr(), nil)
	if err := w.Write(ctx, msgKeyVal(topic, 0)); err != nil {
		t.Fatal(err)
	}
	b1.Close()
	cfg.Addr = b1.Addr()
	b2, err := startOnAddr(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	ps, err := Partitions(ctx, Config{Brokers: []string{b2.Addr()}}, topic)
	if err != nil || !slices.Equal(ps, []int{0, 1}) {
		t.Fatalf("partitions after restart: %v, %v; want [0 1]", ps, err)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b2.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	if got := runReader(t, r, newCollector(1), 500*time.Millisecond); len(got) != 0 {
		t.Errorf("memory-only broker kept %d records across a restart, want 0", len(got))
	}
}

// TestTopicConfigs: StartBroker creates its topics with TopicConfigs, as a broker
// describes them afterwards (the daemon keeps every audit this way).
func TestTopicConfigs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{"kept", "plain"},
		TopicConfigs: map[string]map[string]string{"kept": {"retention.ms": "-1", "retention.bytes": "-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl := &kafka.Client{Addr: kafka.TCP(b.Addr())}
	resp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: "kept", ConfigNames: []string{"retention.ms", "retention.bytes"}},
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: "plain", ConfigNames: []string{"retention.ms"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			t.Fatalf("%s: %v", r.ResourceName, r.Error)
		}
		for _, e := range r.ConfigEntries {
			got[r.ResourceName+"."+e.ConfigName] = e.ConfigValue
		}
	}
	if got["kept.retention.ms"] != "-1" || got["kept.retention.bytes"] != "-1" || got["plain.retention.ms"] == "-1" {
		t.Errorf("topic configs %v, want retention -1 on kept only", got)
	}
	if v, err := TopicSetting(ctx, Config{Brokers: []string{b.Addr()}}, "kept", "retention.ms"); err != nil || v != "-1" {
		t.Errorf("TopicSetting(kept, retention.ms) = %q, %v; want -1", v, err)
	}
}
