package stream

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLeaderOf(t *testing.T) {
	for _, c := range []struct {
		cands []Candidate
		want  string
	}{
		{nil, ""},
		{[]Candidate{{ID: "b"}, {ID: "a"}}, "a"},
		{[]Candidate{{ID: "a"}, {ID: "b", Preferred: true}}, "b"},
		{[]Candidate{{ID: "a", Preferred: true}, {ID: "c", Led: true}, {ID: "b", Led: true}}, "b"},
	} {
		if got := LeaderOf(c.cands); got != c.want {
			t.Errorf("LeaderOf(%v) = %q, want %q", c.cands, got, c.want)
		}
	}
}

// candidate runs one election member until stop, counting its leaderships.
type candidate struct {
	leading atomic.Bool
	terms   atomic.Int32
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

func runCandidate(t *testing.T, addr string, preferred bool) *candidate {
	t.Helper()
	e, err := NewElection(ElectionConfig{Kafka: Config{Brokers: []string{addr}}, Group: "lead", Topic: "leader",
		SessionTimeout: 3 * time.Second, Preferred: preferred})
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = func() { cancel(); c.wg.Wait() }
	c.wg.Go(func() {
		if err := e.Run(ctx, func(lctx context.Context) {
			c.terms.Add(1)
			c.leading.Store(true)
			<-lctx.Done()
			c.leading.Store(false)
		}); err != nil {
			t.Errorf("election: %v", err)
		}
	})
	return c
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > d {
			t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

// TestElection: the preferred candidate leads; when it leaves, the other takes over;
// when it comes back, the leader keeps leading (sticky), and never do two lead at once.
func TestElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{"leader"},
		DataDir: filepath.Join(t.TempDir(), "kafka")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a := runCandidate(t, b.Addr(), true)
	waitUntil(t, "a leads", 20*time.Second, a.leading.Load)
	s := runCandidate(t, b.Addr(), false)
	time.Sleep(4 * time.Second) // a rebalance with both members
	if !a.leading.Load() || s.leading.Load() {
		t.Fatalf("with both: a leads %v, standby leads %v; want a only", a.leading.Load(), s.leading.Load())
	}
	a.stop()
	took := waitUntil(t, "standby takes over", 20*time.Second, s.leading.Load)
	t.Logf("takeover after a clean leave: %v", took)
	a = runCandidate(t, b.Addr(), true)
	time.Sleep(4 * time.Second)
	if a.leading.Load() || !s.leading.Load() || a.terms.Load() != 0 {
		t.Fatalf("after a's return: a leads %v (terms %d), standby %v; want the standby to keep leading", a.leading.Load(), a.terms.Load(), s.leading.Load())
	}
	s.stop()
	a.stop()
}
