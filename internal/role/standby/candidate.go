package standby

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/stream"
)

// CandidateConfig is what a Candidate needs.
type CandidateConfig struct {
	// Election configures the leader election (kafka.leader_group on
	// kafka.topics.leader); its Observe is the Candidate's own.
	Election stream.ElectionConfig
	Adopter  *Adopter
	// Handover makes this daemon ready to lead once every published audit is adopted:
	// it masks every pending deletion in the serving model and enqueues that mask, and
	// returns how many deletions are pending.
	Handover func() (pending int, err error)
	// Lead runs the leader's components until ctx ends (the leadership is lost, or
	// shutdown).
	Lead func(ctx context.Context)
	// Floor is the highest model version seen on the models topic (for the log).
	Floor   func() uint64
	Faults  *fault.Tracker
	Metrics *metrics.Set
	Log     zerolog.Logger
}

// Candidate is a daemon with external brokers taking part in the leader election: a
// primary (preferred when nobody led before) or a standby.
type Candidate struct {
	cfg     CandidateConfig
	el      *stream.Election
	failing atomic.Bool // the election reported an error since its last generation
}

// NewCandidate checks c's election configuration; it connects nothing.
func NewCandidate(c CandidateConfig) (*Candidate, error) {
	cand := &Candidate{cfg: c}
	ec := c.Election
	ec.Observe = cand.observe
	el, err := stream.NewElection(ec)
	if err != nil {
		return nil, err
	}
	cand.el = el
	return cand, nil
}

// Run takes part in the election until ctx ends. Elected, it takes over (TakeOver,
// retried until it succeeds or the leadership ends) and runs Lead until the leadership
// ends. It returns after Lead has returned.
func (c *Candidate) Run(ctx context.Context) error {
	return c.el.Run(ctx, func(lctx context.Context) {
		// The group gave this daemon the leadership: a failed takeover (the broker not
		// answering) is retried, never abandoned, or nobody would lead.
		var b fault.Backoff
		for {
			err := c.takeOver(lctx)
			if err == nil {
				c.cfg.Faults.Recovered("leader")
				break
			}
			wait := b.Next()
			c.cfg.Faults.Fail("leader", fmt.Errorf("take over: %w", err), wait)
			if !fault.Sleep(lctx, wait) {
				return
			}
		}
		c.cfg.Lead(lctx)
	})
}

// takeOver makes an elected candidate the leader: it adopts every audit the previous
// leader published (so its chain continues the published one and no deletion is
// audited twice), then hands over (Handover).
func (c *Candidate) takeOver(ctx context.Context) error {
	t0 := time.Now()
	if err := c.cfg.Adopter.All(ctx); err != nil {
		return err
	}
	pending, err := c.cfg.Handover()
	if err != nil {
		return err
	}
	c.cfg.Metrics.ObserveTakeover(time.Since(t0).Seconds())
	c.cfg.Log.Info().Dur("took", time.Since(t0)).Int("pending", pending).Uint64("floor", c.cfg.Floor()).Msg("took over as leader")
	return nil
}

// observe logs the election's steps: each generation at info, the first error after a
// generation at warn and the rest at debug (kafka-go's own messages say where a join
// or a sync failed), a consumer group made anew at warn. Election errors are not
// faults: a rebalance, which a replica joining causes, reports one.
func (c *Candidate) observe(ev stream.ElectionEvent) {
	log := c.cfg.Log
	switch ev.Kind {
	case stream.EventGeneration:
		c.failing.Store(false)
		log.Info().Int("generation", ev.Generation).Str("member", ev.Member).Bool("leads", ev.Leads).Msg("election generation")
	case stream.EventRejoin:
		log.Warn().Err(ev.Err).Msg("election: making the consumer group anew")
	default:
		err := ev.Err
		if ev.Kind == stream.EventClient {
			err = errors.New(ev.Client)
		}
		lvl := zerolog.DebugLevel
		if !c.failing.Swap(true) {
			lvl = zerolog.WarnLevel
		}
		log.WithLevel(lvl).Err(err).Msg("election: retrying")
	}
}
