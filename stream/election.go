package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// Observe, if set, is called with each step of the election: a generation joined,
	// an error of the group protocol, a consumer group made anew. It is called from
	// Run's goroutine and from kafka-go's (EventClient), so it must be safe for
	// concurrent use, and return promptly.
	Observe func(ElectionEvent)
}

// ElectionEvent is one step of an Election, for logs and status.
type ElectionEvent struct {
	Kind       ElectionEventKind
	Generation int    // the generation joined (EventGeneration)
	Member     string // this member's id in it (EventGeneration)
	Leads      bool   // whether it leads that generation (EventGeneration)
	Err        error  // what failed (EventError, EventRejoin)
	// Client is a message of kafka-go's consumer group (EventClient): it says
	// where a join or a sync failed.
	Client string
}

// ElectionEventKind says what an ElectionEvent reports.
type ElectionEventKind int

const (
	// EventGeneration: a generation was joined.
	EventGeneration ElectionEventKind = iota + 1
	// EventError: the group reported an error, or no generation came in time while
	// leading; the member steps down if it led, and tries again.
	EventError
	// EventRejoin: no generation came for rejoinAfter session timeouts; the consumer
	// group is made anew.
	EventRejoin
	// EventClient: kafka-go's consumer group logged an error.
	EventClient
)

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
//
// Liveness: the leader commits a changing offset of the election topic under its
// generation (its beat); a member that does not lead and sees the beat stand still for
// rejoinAfter session timeouts rejoins with a new consumer group, which makes the
// coordinator drop members that are gone but still hold the partition (see beat).
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
	c := &campaign{e: e, lead: lead, watch: beatWatch{value: math.MinInt64}}
	if e.cfg.Observe != nil {
		c.clientLog = kafka.LoggerFunc(func(format string, args ...any) {
			c.observe(ElectionEvent{Kind: EventClient, Client: fmt.Sprintf(format, args...)})
		})
	}
	var err error
	if c.cg, err = c.newGroup(); err != nil {
		return err
	}
	defer func() {
		c.stepDown()
		c.cg.Close()
	}()
	tctx, stopTransport := context.WithCancel(context.Background())
	defer stopTransport()
	tr, err := e.cfg.Kafka.transport(tctx)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	c.client = &kafka.Client{Addr: kafka.TCP(e.cfg.Kafka.Brokers...), Transport: tr, Timeout: e.cfg.SessionTimeout / 2}
	ticker := time.NewTicker(e.cfg.SessionTimeout)
	defer ticker.Stop()
	for {
		if done, err := c.round(ctx, ticker.C); done {
			return err
		}
	}
}

// campaign is the state of one Run: its consumer group, the lead goroutine while this
// member leads, the leader's beat as seen, and the current generation.
type campaign struct {
	e         *Election
	lead      func(ctx context.Context)
	clientLog kafka.Logger
	cg        *kafka.ConsumerGroup
	client    *kafka.Client
	watch     beatWatch
	// stop cancels the lead goroutine's context and done is closed when it has
	// returned; stop is nil while this member does not lead.
	stop context.CancelFunc
	done chan struct{}
	// ended is closed when the current generation ends; nil before the first.
	ended chan struct{}
}

// observe reports ev to the configured observer, if any.
func (c *campaign) observe(ev ElectionEvent) {
	if c.e.cfg.Observe != nil {
		c.e.cfg.Observe(ev)
	}
}

// newGroup makes the election's consumer group.
func (c *campaign) newGroup() (*kafka.ConsumerGroup, error) {
	e := c.e
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: e.cfg.Group, Brokers: e.cfg.Kafka.Brokers, Dialer: e.dialer, Topics: []string{e.cfg.Topic},
		GroupBalancers: []kafka.GroupBalancer{balancer{e}},
		SessionTimeout: e.cfg.SessionTimeout, RebalanceTimeout: e.cfg.SessionTimeout,
		HeartbeatInterval: e.cfg.SessionTimeout / 5, JoinGroupBackoff: 200 * time.Millisecond,
		Timeout: e.cfg.SessionTimeout / 2, ErrorLogger: c.clientLog,
	})
	if err != nil {
		return nil, fmt.Errorf("stream: election: %w", err)
	}
	return cg, nil
}

// stepDown ends the lead goroutine, if this member leads, and waits for it.
func (c *campaign) stepDown() {
	if c.stop != nil {
		c.stop()
		<-c.done
		c.stop = nil
	}
}

// rejoin makes the consumer group anew (EventRejoin), for why.
func (c *campaign) rejoin(why error) error {
	c.observe(ElectionEvent{Kind: EventRejoin, Err: why})
	c.cg.Close()
	var err error
	if c.cg, err = c.newGroup(); err != nil {
		return err
	}
	c.watch.since = time.Now()
	return nil
}

// round waits for the current generation to end, if there is one, and joins the next.
// It reports whether Run is done, with Run's error.
func (c *campaign) round(ctx context.Context, tick <-chan time.Time) (done bool, err error) {
	e := c.e
	if c.ended != nil {
		// A member: wait for the generation to end (a rebalance), then join the next;
		// a member that does not lead also watches the leader's beat.
		switch e.waitEnd(ctx, c.ended, c.stop == nil, tick, c.client, &c.watch) {
		case waitDone:
			return true, nil
		case waitStale:
			if err := c.rejoin(fmt.Errorf("the leader's beat on %s has not changed for %v", e.cfg.Topic, time.Since(c.watch.since).Round(time.Second))); err != nil {
				return true, err
			}
			c.ended = nil
		}
	}
	// The leader must confirm the next generation within half a session timeout. A
	// member that does not lead gets one within a few session timeouts (a rebalance
	// waits at most one for silent members); kafka-go's group can hang for good when
	// its broker restarts mid-rebalance (seen: a daemon that never led again), so
	// past rejoinAfter session timeouts the group is made anew.
	wait := rejoinAfter * e.cfg.SessionTimeout
	if c.stop != nil {
		wait = e.cfg.SessionTimeout / 2
	}
	nctx, cancel := context.WithTimeout(ctx, wait)
	gen, err := c.cg.Next(nctx)
	timedOut := nctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return true, nil
	}
	if err != nil {
		return c.missed(ctx, err, timedOut, wait)
	}
	c.joined(ctx, gen)
	return false, nil
}

// missed handles a generation that did not come within wait (timedOut) or failed with
// err: a leader steps down before anyone else may lead; a member that does not lead
// and timed out makes its group anew; other errors are observed and retried after a
// pause. It reports whether Run is done, with Run's error.
func (c *campaign) missed(ctx context.Context, err error, timedOut bool, wait time.Duration) (done bool, _ error) {
	leading := c.stop != nil
	c.stepDown() // leadership not confirmed in time: step down before anyone else may lead
	c.ended = nil
	if !leading && timedOut {
		if err := c.rejoin(fmt.Errorf("no generation within %v", wait)); err != nil {
			return true, err
		}
		return false, nil
	}
	c.observe(ElectionEvent{Kind: EventError, Err: err})
	return !sleepCtx(ctx, 200*time.Millisecond), nil
}

// joined starts following generation gen: it notes when gen ends, and leads (beats,
// and runs lead unless it already runs) or steps down as gen assigns the partition.
func (c *campaign) joined(ctx context.Context, gen *kafka.Generation) {
	e := c.e
	end := make(chan struct{})
	c.ended = end
	gen.Start(func(gctx context.Context) {
		<-gctx.Done()
		close(end)
	})
	leads := len(gen.Assignments[e.cfg.Topic]) > 0
	c.observe(ElectionEvent{Kind: EventGeneration, Generation: int(gen.ID), Member: gen.MemberID, Leads: leads})
	c.watch.since = time.Now()
	if !leads {
		e.led.Store(false)
		c.stepDown()
		return
	}
	gen.Start(func(gctx context.Context) { e.beat(gctx, gen) })
	e.led.Store(true)
	if c.stop == nil {
		c.stop, c.done = startLead(ctx, c.lead)
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
// generation, or for a change of the leader's beat, before it makes its consumer group
// anew.
const rejoinAfter = 3

// The leader's beat. Group membership alone does not show that the member a generation
// gave the partition to is alive: a broker may keep a member that died while its join
// was parked (kfake does: a join response it cannot deliver arms no session timer, and
// the leader's sync then clears the barrier that would have removed it). Such a member
// holds the partition forever, nobody leads, and the live members' heartbeats keep the
// generation stable. So the leader commits an ever-changing offset of the election
// topic's partition under its generation (a commit needs the current generation and
// member id: a dead or fenced member cannot make one) every half session timeout, and
// a member that does not lead reads the group's committed offset every session
// timeout. When it has not changed for rejoinAfter session timeouts, the member makes
// its consumer group anew: its join starts a rebalance, which removes every member
// that does not rejoin, and the sticky assignment keeps a live leader leading.

// beat commits the leader's beat until gctx ends (the generation is over). Failed
// commits are retried at the next tick; a leader that cannot commit for long loses
// its generation anyway.
func (e *Election) beat(gctx context.Context, gen *kafka.Generation) {
	t := time.NewTicker(e.cfg.SessionTimeout / 2)
	defer t.Stop()
	for {
		_ = gen.CommitOffsets(map[string]map[int]int64{e.cfg.Topic: {0: time.Now().UnixNano()}})
		select {
		case <-gctx.Done():
			return
		case <-t.C:
		}
	}
}

// beatWatch is what a member that does not lead has seen of the leader's beat.
type beatWatch struct {
	value int64     // the last committed offset read
	since time.Time // when it last changed, or the member last joined a generation
}

type waitResult int

const (
	waitEnded waitResult = iota // the generation ended
	waitDone                    // ctx ended
	waitStale                   // the leader's beat did not change for rejoinAfter session timeouts
)

// waitEnd waits for the generation to end. A member that does not lead reads the
// leader's beat at every tick meanwhile; failed reads are ignored (a broker that does
// not answer ends the generation by itself).
func (e *Election) waitEnd(ctx context.Context, ended <-chan struct{}, watching bool, tick <-chan time.Time,
	client *kafka.Client, w *beatWatch) waitResult {
	for {
		select {
		case <-ctx.Done():
			return waitDone
		case <-ended:
			return waitEnded
		case <-tick:
			if !watching {
				continue
			}
			resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.cfg.Group,
				Topics: map[string][]int{e.cfg.Topic: {0}}})
			if err != nil || resp.Error != nil || len(resp.Topics[e.cfg.Topic]) != 1 || resp.Topics[e.cfg.Topic][0].Error != nil {
				continue
			}
			if v := resp.Topics[e.cfg.Topic][0].CommittedOffset; v != w.value {
				w.value, w.since = v, time.Now()
				continue
			}
			if time.Since(w.since) >= rejoinAfter*e.cfg.SessionTimeout {
				return waitStale
			}
		}
	}
}

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
