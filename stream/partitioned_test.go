package stream

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestWriteBalancer(t *testing.T) {
	ps := []int{0, 1, 2, 3}
	byKey := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte("k")}, ps...)
	want := (byKey + 1) % len(ps) // not the key's partition
	b := explicitBalancer{}
	if got := b.Balance(kafka.Message{Key: []byte("k"), Partition: want}, ps...); got != want {
		t.Errorf("placed: got partition %d, want %d", got, want)
	}
	for _, p := range []int{9, -1} { // no such partition, or none asked: by key
		if got := b.Balance(kafka.Message{Key: []byte("k"), Partition: p}, ps...); got != byKey {
			t.Errorf("partition %d: got %d, want the key's %d", p, got, byKey)
		}
	}
}

// TestWritePlaced: through a broker, a Placed message lands on its Partition, and an
// unplaced one on its key's partition whatever its Partition field says (a consumed
// message's partition must not leak into where a copy of it goes).
func TestWritePlaced(t *testing.T) {
	ctx := context.Background()
	br, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	cfg := Config{Brokers: []string{br.Addr()}}
	w, err := NewWriter(WriterConfig{Kafka: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	byKey := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte("k")}, 0, 1, 2, 3)
	other := (byKey + 2) % 4
	if err := w.Write(ctx,
		Message{Topic: "t", Key: []byte("k"), Value: []byte("placed"), Partition: other, Placed: true},
		Message{Topic: "t", Key: []byte("k"), Value: []byte("unplaced"), Partition: other}); err != nil {
		t.Fatal(err)
	}
	ms, err := ReadAll(ctx, cfg, "t")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range ms {
		got[string(m.Value)] = m.Partition
	}
	if len(got) != 2 || got["placed"] != other || got["unplaced"] != byKey {
		t.Errorf("partitions %v, want placed on %d and unplaced on the key's %d", got, other, byKey)
	}
}
