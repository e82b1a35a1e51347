// Package lag polls the consumer lag of cairnd's readers: every second, the end offsets
// of the topics they read, from the broker, against the offsets the daemon applied, and
// with them whether the broker answers (fault.Broker).
//
// # Contracts
//
// A Poller's fields are set before Run and not changed while it runs. Run blocks until
// ctx ends and starts no goroutine; Lag is safe to call concurrently with it and returns
// a copy.
package lag

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/stream"
)

// Metrics are the metrics a Poller sets (internal/metrics.Set).
type Metrics interface {
	SetBrokerUp(up bool)
	SetLag(topic string, part int, lag int64)
}

// Poller refreshes the lag of Topics on Kafka every second.
type Poller struct {
	Kafka  stream.Config
	Topics []string
	// Applied is the last offset applied of a partition, and whether one is.
	Applied func(topic string, part int) (last int64, ok bool, err error)
	// Tick runs at the start of every round (nil: nothing).
	Tick    func()
	Broker  *fault.Broker
	Faults  *fault.Tracker
	Metrics Metrics
	Log     zerolog.Logger

	mu  sync.Mutex
	lag map[string]int64
}

// Lag is, per "topic/partition", the messages not yet applied as last polled.
func (p *Poller) Lag() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.lag))
	for k, v := range p.lag {
		out[k] = v
	}
	return out
}

// TopicLag is the messages of topic not yet applied as last polled, over its
// partitions.
func (p *Poller) TopicLag(topic string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for k, v := range p.lag {
		if t, _, ok := strings.Cut(k, "/"); ok && t == topic {
			n += v
		}
	}
	return n
}

// Run polls every second until ctx ends; it returns nil. A failure to read an applied
// offset is reported to Faults (site "lag"), an unanswered broker to Broker.
func (p *Poller) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if p.Tick != nil {
			p.Tick()
		}
		for _, topic := range p.Topics {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ends, err := stream.EndOffsets(lctx, p.Kafka, topic)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			p.Broker.Polled(err)
			p.Metrics.SetBrokerUp(p.Broker.Err() == nil)
			if err != nil {
				p.Log.Debug().Err(err).Str("topic", topic).Msg("lag: end offsets")
				continue
			}
			p.record(topic, ends)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// record stores the lag of topic's partitions, whose end offsets are ends.
func (p *Poller) record(topic string, ends map[int]int64) {
	for part, end := range ends {
		last, ok, err := p.Applied(topic, part)
		if err != nil {
			p.Faults.Fail("lag", err, time.Second)
			break
		}
		next := int64(0)
		if ok {
			next = last + 1
		}
		lag := max(0, end-next)
		p.mu.Lock()
		if p.lag == nil {
			p.lag = map[string]int64{}
		}
		p.lag[fmt.Sprintf("%s/%d", topic, part)] = lag
		p.mu.Unlock()
		p.Metrics.SetLag(topic, part, lag)
	}
}
