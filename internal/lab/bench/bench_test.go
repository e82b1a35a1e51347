package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/stream"
)

// TestLoadPairs: an answer read before its query record still pairs with it, a record
// read twice counts once, and other requests' records are ignored.
func TestLoadPairs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	msg := func(topic, req string, ms int) stream.Message {
		return stream.Message{Topic: topic, Key: []byte(req), Time: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	p := NewLoadPairs("b-load-", "q")
	for _, m := range []stream.Message{
		msg("a", "b-load-1", 7), // the answer first
		msg("q", "b-load-0", 0),
		msg("q", "b-load-1", 2),
		msg("a", "b-load-1", 9), // a duplicate answer
		msg("a", "other-3", 4),
		msg("q", "b-load-0", 0), // a duplicate query record
		msg("a", "b-load-0", 3),
	} {
		p.Add(m)
	}
	if want := []float64{5, 3}; !slices.Equal(p.Latencies(), want) {
		t.Errorf("latencies %v ms, want %v", p.Latencies(), want)
	}
}
