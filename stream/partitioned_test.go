package stream

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestWriteBalancerPartitioned(t *testing.T) {
	ps := []int{0, 1, 2, 3}
	byKey := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte("k")}, ps...)
	want := (byKey + 1) % len(ps) // not the key's partition
	m := kafka.Message{Key: []byte("k"), Partition: want}
	if got := writeBalancer(true).Balance(m, ps...); got != want {
		t.Errorf("partitioned: got partition %d, want %d", got, want)
	}
	m.Partition = 9 // the topic has no partition 9: by key
	if got := writeBalancer(true).Balance(m, ps...); got != byKey {
		t.Errorf("partitioned, missing partition: got %d, want the key's %d", got, byKey)
	}
	if got := writeBalancer(false).Balance(kafka.Message{Key: []byte("k"), Partition: want}, ps...); got != byKey {
		t.Errorf("by key: got %d, want %d", got, byKey)
	}
}
