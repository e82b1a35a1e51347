package lag

import (
	"errors"
	"maps"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
)

type fakeMetrics map[string]int64

func (f fakeMetrics) SetBrokerUp(bool) {}
func (f fakeMetrics) SetLag(topic string, part int, lag int64) {
	f[topic+"/"+string(rune('0'+part))] = lag
}

// TestRecord: a partition's lag is its end offset less the next offset to apply (0
// when none is applied, never negative), in Lag and the metrics; a failed read of the
// applied offsets is a fault and leaves the lag as it was.
func TestRecord(t *testing.T) {
	applied := map[int]int64{0: 9, 2: 20}
	m := fakeMetrics{}
	p := &Poller{Metrics: m, Faults: fault.NewTracker(zerolog.Nop(), nil),
		Applied: func(_ string, part int) (int64, bool, error) {
			last, ok := applied[part]
			return last, ok, nil
		}}
	p.record("train", map[int]int64{0: 15, 1: 4, 2: 3})
	want := map[string]int64{"train/0": 5, "train/1": 4, "train/2": 0}
	if got := p.Lag(); !maps.Equal(got, want) {
		t.Errorf("lag = %v, want %v", got, want)
	}
	if !maps.Equal(map[string]int64(m), want) {
		t.Errorf("metrics = %v, want %v", m, want)
	}

	p.Applied = func(string, int) (int64, bool, error) { return 0, false, errors.New("store closed") }
	p.record("train", map[int]int64{0: 100})
	if got := p.Lag(); !maps.Equal(got, want) {
		t.Errorf("after a failed read: lag = %v, want %v", got, want)
	}
	if p.Faults.Err() == nil {
		t.Error("a failed read of the applied offsets is not a fault")
	}
	// TopicLag sums one topic's partitions, and only that topic's.
	p.Applied = func(string, int) (int64, bool, error) { return 0, false, nil }
	p.record("trainx", map[int]int64{0: 7})
	if got := p.TopicLag("train"); got != 9 {
		t.Errorf("TopicLag(train) = %d, want 9", got)
	}
	if got := p.TopicLag("trainx"); got != 7 {
		t.Errorf("TopicLag(trainx) = %d, want 7", got)
	}
}
