package modeltopic

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// TestFloor: Raise only raises, also when called at once from many goroutines.
func TestFloor(t *testing.T) {
	var f Floor
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { f.Raise(uint64(i)) })
	}
	wg.Wait()
	f.Raise(3)
	if got := f.Load(); got != 63 {
		t.Errorf("floor %d, want 63", got)
	}
}

// testModel is a served model of m landmarks of a seeded MLP with random coefficients.
func testModel(t *testing.T, version uint64, m int) *serving.Model {
	t.Helper()
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	in := serving.Input{Version: version, Points: 3 * m, Scale: 1, A: mat.NewDense(m, 3, nil), B: []float64{0.1, 0.2, 0.3}}
	in.LandmarkX = make([]float64, m*b.InDim())
	for i := range in.LandmarkX {
		in.LandmarkX[i] = r.NormFloat64()
	}
	for l := range m {
		in.LandmarkIDs = append(in.LandmarkIDs, fmt.Sprintf("p%02d", l))
		in.Views = append(in.Views, "AB"[l%2])
		in.Omega = append(in.Omega, 0.5+r.Float64())
		for c := range 3 {
			in.A.Set(l, c, r.NormFloat64())
		}
	}
	in.ID = serving.ModelID(in.LandmarkIDs, in.Views, in.A, in.B)
	s, err := serving.New(in, serving.Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", ExactMemoryBytes: 1 << 30, Fits: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// installed is what a follower installed.
type installed struct {
	mu      sync.Mutex
	version uint64
	id      string
	masked  []string
}

// topic is the tests' models topic.
const topic = "t.models"

// modelsTopic starts an embedded broker with the compacted one-partition models topic
// and a writer to it, both closed when the test ends.
func modelsTopic(ctx context.Context, t *testing.T) (stream.Config, *stream.Writer) {
	t.Helper()
	b, err := stream.StartBroker(ctx, stream.BrokerConfig{Addr: "127.0.0.1:0", Topics: []string{topic}, Partitions: 1,
		TopicConfigs: map[string]map[string]string{topic: {"cleanup.policy": "compact"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kc := stream.Config{Brokers: []string{b.Addr()}}
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return kc, w
}

// TestPublishFollow: on an embedded broker, a leader's Publisher puts the serving
// version on the topic, a Follower installs it (same id, the floor raised), applies a
// mask written afterwards, and its Fence returns once that mask is applied.
func TestPublishFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kc, w := modelsTopic(ctx, t)
	s := testModel(t, 7, 6)
	faults := fault.NewTracker(zerolog.Nop(), nil)
	var leaderFloor, followerFloor Floor
	pub := NewPublisher(PublisherConfig{Kafka: kc, Topic: topic, Features: "fp", Floor: &leaderFloor,
		Serving: func() *serving.Model { return s }, Faults: faults, Log: zerolog.Nop()})
	var got installed
	fol := NewFollower(FollowerConfig{Kafka: kc, Topic: topic, Features: "fp", Floor: &followerFloor,
		Leading: func() bool { return false },
		Install: func(v *modelbus.Version, mask []string) error {
			got.mu.Lock()
			defer got.mu.Unlock()
			got.version, got.id, got.masked = v.Version, v.ID, mask
			return nil
		},
		Mask: func(mask func(uint64) []string) {
			got.mu.Lock()
			defer got.mu.Unlock()
			got.masked = mask(got.version)
		},
		Faults: faults, Metrics: metrics.New(), Log: zerolog.Nop()})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = pub.Run(ctx, w) })
	wg.Go(func() { _ = fol.Run(ctx) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		got.mu.Lock()
		v, id := got.version, got.id
		got.mu.Unlock()
		// The leader raises its floor once the broker acknowledged the write, and the
		// follower once Install returned; either can come after the install is seen here.
		if v == 7 && leaderFloor.Load() == 7 && followerFloor.Load() == 7 {
			if id != s.ID {
				t.Fatalf("installed model id %s, want %s", id, s.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version 7 not installed (installed %d, floors %d (leader) and %d (follower); faults: %v)", v, leaderFloor.Load(), followerFloor.Load(), faults.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leaderFloor.Load() != 7 || followerFloor.Load() != 7 {
		t.Errorf("floors %d (leader), %d (follower), want 7", leaderFloor.Load(), followerFloor.Load())
	}
	m := modelbus.Mask(7, []string{"p01"})
	if err := w.Write(ctx, stream.Message{Topic: topic, Key: m.Key, Value: m.Value}); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	if err := fol.Fence(fctx); err != nil {
		t.Fatal(err)
	}
	got.mu.Lock()
	masked := got.masked
	got.mu.Unlock()
	if !slices.Equal(masked, []string{"p01"}) {
		t.Errorf("after the fence the mask is %v, want [p01]", masked)
	}
}

// TestPublishFollowPoints: the leader puts the points of its serving model's gradient
// rows on the topic and the follower hands them over with their bits and the rows'
// class count; a point whose row the leader masks gets a tombstone, and a point whose
// row the ingest appends (no kick) is published by the next look.
func TestPublishFollowPoints(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kc, w := modelsTopic(ctx, t)
	s := testModel(t, 7, 6)
	r := rand.New(rand.NewPCG(2, 2))
	point := func(i, label int) serving.GradPoint {
		x := make([]float64, s.Backbone.InDim())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		return serving.GradPoint{ID: fmt.Sprintf("q%d", i), Version: int64(10 + i), X: x, Label: label}
	}
	pts := []serving.GradPoint{point(0, 0), point(1, 2), point(2, 1), point(3, 0)}
	g, err := serving.NewGradRows(s.Backbone, pts, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	var model atomic.Pointer[serving.Model]
	model.Store(s.WithGrad(g, nil))
	faults := fault.NewTracker(zerolog.Nop(), nil)
	var leaderFloor, followerFloor Floor
	pub := NewPublisher(PublisherConfig{Kafka: kc, Topic: topic, Features: "fp", Floor: &leaderFloor,
		Serving: model.Load, Faults: faults, Log: zerolog.Nop()})
	var mu sync.Mutex
	got, classes := map[string]modelbus.Point{}, 0
	fol := NewFollower(FollowerConfig{Kafka: kc, Topic: topic, Features: "fp", Floor: &followerFloor,
		Leading: func() bool { return false },
		Install: func(*modelbus.Version, []string) error { return nil }, Mask: func(func(uint64) []string) {},
		Points: func(ps []modelbus.Point, c int, _ func(uint64) []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ps {
				if p.X == nil {
					delete(got, p.ID)
				} else {
					got[p.ID] = p
				}
			}
			if c > 0 {
				classes = c
			}
		},
		Faults: faults, Metrics: metrics.New(), Log: zerolog.Nop()})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = pub.Run(ctx, w) })
	wg.Go(func() { _ = fol.Run(ctx) })
	wait := func(what string, want []serving.GradPoint) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			ok := len(got) == len(want) && classes == 3
			for _, p := range want {
				q, in := got[p.ID]
				ok = ok && in && q.Version == p.Version && q.Label == p.Label && slices.Equal(q.X, p.X)
			}
			n := len(got)
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the follower holds %d points and %d classes, want %d and 3 (faults: %v)", what, n, classes, len(want), faults.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("published", pts)
	model.Store(model.Load().WithMask([]string{"q1"}))
	pub.Kick()
	wait("q1 masked", []serving.GradPoint{pts[0], pts[2], pts[3]})
	q5 := point(5, 2)
	model.Store(model.Load().WithGradPoints([]serving.GradPoint{q5}, 1<<30))
	wait("q5 appended", []serving.GradPoint{pts[0], pts[2], pts[3], q5})
}
