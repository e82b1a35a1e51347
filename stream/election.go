package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// ElectionConfig configures an Election.
type ElectionConfig struct {
	Kafka Config
	// Group is the consumer group of the candidates; Topic a topic of one partition,
	// which the group gives to the leader. Nothing is ever written to it.
	Group, Topic string
	// SessionTimeout is how long the coordinator waits for a silent member before a
	// rebalance gives its partition to another. Default 10s.
	SessionTimeout time.Duration
	// Preferred candidates (the configured primary) lead when no member led the
	// previous generation.
	Preferred bool
}

// Election decides, with Kafka's group membership and nothing of cairn's own, which of
// several candidates leads: the member the group coordinator's generation assigns the
// election topic's one partition. The assignment is sticky: the member that led the
// previous generation keeps leading through rebalances (a candidate joining or
// leaving), else a preferred member, else the first by member id.
//
// Fencing: the leader steps down (its lead context is cancelled) when a generation
// assigns the partition to someone else, and also when it cannot confirm a new
// generation within half the session timeout after the last one ended, which is
// before the coordinator could give the partition to another member.
type Election struct {
	cfg    ElectionConfig
	dialer *kafka.Dialer
	led    atomic.Bool // led the last generation (the balancer's user data)
}

// NewElection checks cfg; it connects nothing.
func NewElection(cfg ElectionConfig) (*Election, error) {
	errs := []error{cfg.Kafka.Validate()}
	if cfg.Group == "" || cfg.Topic == "" {
		errs = append(errs, fmt.Errorf("%w: election: group %q and topic %q must be set", ErrConfig, cfg.Group, cfg.Topic))
	}
	if cfg.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: election: negative session timeout", ErrConfig))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	d, err := cfg.Kafka.dialer()
	if err != nil {
		return nil, err
	}
	return &Election{cfg: cfg, dialer: d}, nil
}

// Run takes part in the election until ctx ends. Each time this member becomes leader
// it calls lead on a goroutine of its own with a context that ends when it stops
// leading (or ctx ends); Run returns only after lead has returned. Errors of the group
// protocol are retried; Run returns nil when ctx ends.
func (e *Election) Run(ctx context.Context, lead func(ctx context.Context)) error {
	newGroup := func() (*kafka.ConsumerGroup, error) {
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID: e.cfg.Group, Brokers: e.cfg.Kafka.Brokers, Dialer: e.dialer, Topics: []string{e.cfg.Topic},
			GroupBalancers: []kafka.GroupBalancer{balancer{e}},
			SessionTimeout: e.cfg.SessionTimeout, RebalanceTimeout: e.cfg.SessionTimeout,
			HeartbeatInterval: e.cfg.SessionTimeout / 5, JoinGroupBackoff: 200 * time.Millisecond,
			Timeout: e.cfg.SessionTimeout / 2,
		})
		if err != nil {
			return nil, fmt.Errorf("stream: election: %w", err)
		}
		return cg, nil
	}
	cg, err := newGroup()
	if err != nil {
		return err
	}
	var (
		stop context.CancelFunc
		done chan struct{}
	)
	stepDown := func() {
		if stop != nil {
			stop()
			<-done
			stop = nil
		}
	}
	defer func() {
		stepDown()
		cg.Close()
	}()
	var ended chan struct{} // closed when the current generation ends; nil before the first
	for {
		if ended != nil {
			// A member: wait for the generation to end (a rebalance), then join the next.
			select {
			case <-ctx.Done():
				return nil
			case <-ended:
			}
		}
		// The leader must confirm the next generation within half a session timeout. A
		// member that does not lead gets one within a few session timeouts (a rebalance
		// waits at most one for silent members); kafka-go's group can hang for good when
		// its broker restarts mid-rebalance (seen: a daemon that never led again), so
		// past rejoinAfter session timeouts the group is made anew.
		wait := rejoinAfter * e.cfg.SessionTimeout
		if stop != nil {
			wait = e.cfg.SessionTimeout / 2
		}
		nctx, cancel := context.WithTimeout(ctx, wait)
		gen, err := cg.Next(nctx)
		timedOut := nctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			leading := stop != nil
			stepDown() // leadership not confirmed in time: step down before anyone else may lead
			ended = nil
			if !leading && timedOut {
				cg.Close()
				if cg, err = newGroup(); err != nil {
					return err
				}
				continue
			}
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return nil
			}
			continue
		}
		end := make(chan struct{})
		ended = end
		gen.Start(func(gctx context.Context) {
			<-gctx.Done()
			close(end)
		})
		if len(gen.Assignments[e.cfg.Topic]) == 0 {
			e.led.Store(false)
			stepDown()
			continue
		}
		e.led.Store(true)
		if stop == nil {
			stop, done = startLead(ctx, lead)
		}
	}
}

// startLead runs lead on a goroutine of its own with a context of its own, returning
// that context's cancel and a channel closed when lead has returned.
func startLead(ctx context.Context, lead func(ctx context.Context)) (context.CancelFunc, chan struct{}) {
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	return stop, done
}

// rejoinAfter is how many session timeouts a member that does not lead waits for a
// generation before it makes its consumer group anew.
const rejoinAfter = 3

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// balancer is the election's kafka-go GroupBalancer: user data says whether the member
// led the last generation and whether it is preferred.
type balancer struct{ e *Election }

func (balancer) ProtocolName() string { return "cairn-leader" }

func (b balancer) UserData() ([]byte, error) {
	var u [2]byte
	if b.e.led.Load() {
		u[0] = 1
	}
	if b.e.cfg.Preferred {
		u[1] = 1
	}
	return u[:], nil
}

// AssignGroups gives every partition of the election topic to one member: the one that
// led, else a preferred one, else the first by id (LeaderOf).
func (b balancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	out := kafka.GroupMemberAssignments{}
	cands := make([]Candidate, len(members))
	for i, m := range members {
		cands[i] = Candidate{ID: m.ID, Led: len(m.UserData) > 0 && m.UserData[0] == 1,
			Preferred: len(m.UserData) > 1 && m.UserData[1] == 1}
		out[m.ID] = map[string][]int{}
	}
	leader := LeaderOf(cands)
	if leader == "" {
		return out
	}
	for _, p := range partitions {
		out[leader][p.Topic] = append(out[leader][p.Topic], p.ID)
	}
	return out
}

// Candidate is a member of an election as its balancer sees it.
type Candidate struct {
	ID             string
	Led, Preferred bool
}

// LeaderOf is the election's rule: among the candidates, the first by id that led the
// last generation, else the first preferred one, else the first ("" for none).
func LeaderOf(cands []Candidate) string {
	c := slices.Clone(cands)
	slices.SortFunc(c, func(a, b Candidate) int {
		switch {
		case a.Led != b.Led:
			if a.Led {
				return -1
			}
			return 1
		case a.Preferred != b.Preferred:
			if a.Preferred {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	if len(c) == 0 {
		return ""
	}
	return c[0].ID
}
