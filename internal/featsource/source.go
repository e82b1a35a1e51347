package featsource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// Defaults of Config.
const (
	DefaultMaxBytes = 256 << 20
	// maxPerEvent bounds the records kept for one training event (repeats after a
	// rebalance, or featurizers of two deployments), maxRefused the messages kept for
	// the ingest to dead-letter.
	maxPerEvent = 4
	maxRefused  = 1024
	// idlePoll is the reader's MaxWait (see New).
	idlePoll = time.Second
)

// Config is what a Source needs.
type Config struct {
	// Train is the training topic, Topic the features topic (featrec.Topic); Run
	// creates Topic with Train's partition count when it is missing.
	Train, Topic string
	// Applied returns the last applied offset of a training partition (the store's;
	// the daemon's startOffset). Required.
	Applied stream.StartFunc
	// MaxBytes bounds the encoded bytes of the records held, in equal shares per
	// training partition. Default DefaultMaxBytes.
	MaxBytes int
	// Quiet: Lookup stops waiting once no record above the floor came for this long.
	// Default ingest.DefaultFeatureTimeout.
	Quiet time.Duration
	// Kafka is the cluster, FetchMaxBytes the bound of one fetch (stream.ReaderConfig);
	// Faults reports the reader's failures (component "features"); Log is told when
	// reading starts.
	Kafka         stream.Config
	FetchMaxBytes int
	Faults        *fault.Tracker
	Log           zerolog.Logger
	// Publish, if set, says whether this daemon leads; while it does, Run publishes
	// the applied offsets of Train every publishEvery as featrec.AppliedGroup's
	// (stream.Progress), so that featurizers skip what is applied already. Nil
	// publishes nothing.
	Publish func() bool
}

// Stats count what a Source did since it was built (the primary's /status "features").
// Stale records were computed by a featurizer for events the primary had applied
// already: rows computed twice.
type Stats struct {
	Filed   uint64 `json:"filed"`   // records filed for the ingest
	Taken   uint64 `json:"taken"`   // records handed to the ingest by Lookup
	Stale   uint64 `json:"stale"`   // records dropped at or below the floor (applied, or passed)
	Dropped uint64 `json:"dropped"` // records or refused messages dropped beyond maxPerEvent or maxRefused
	Other   uint64 `json:"other"`   // records of another training topic, ignored
	Held    int    `json:"held"`    // records held now
}

// key is a training event's partition and offset.
type key struct {
	part int
	off  int64
}

// Source holds the feature records of the events the primary has not applied yet.
type Source struct {
	cfg Config
	r   *stream.Reader

	mu   sync.Mutex
	recs map[key][]stream.Message
	// held is the encoded bytes of the records held per training partition, each
	// bounded by share = MaxBytes / the partitions read (MaxBytes until Run knows them).
	held    map[int]int
	share   int
	floor   map[int]int64 // per training partition: records at or below are not needed
	refused []stream.Message
	// arrived is closed (and replaced) when records were filed (once per batch read:
	// unwoken says some were filed since), freed when records leave; heard is when a
	// record of the training topic last came (filed or stale), and front the highest
	// source offset of such a record per training partition: how far the featurizers
	// have got.
	arrived, freed chan struct{}
	unwoken        bool
	heard          time.Time
	front          map[int]int64
	stats          Stats
}

// New checks c and builds the Source; it connects nothing.
func New(c Config) (*Source, error) {
	if c.Train == "" || c.Topic == "" || c.Applied == nil || c.Faults == nil {
		return nil, errors.New("featsource: a training topic, a features topic, Applied and a fault tracker are required")
	}
	if c.MaxBytes < 0 || c.Quiet < 0 {
		return nil, fmt.Errorf("featsource: max bytes %d and quiet %v must not be negative", c.MaxBytes, c.Quiet)
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Quiet == 0 {
		c.Quiet = ingest.DefaultFeatureTimeout
	}
	s := &Source{cfg: c, recs: map[key][]stream.Message{}, floor: map[int]int64{}, held: map[int]int{}, share: c.MaxBytes,
		arrived: make(chan struct{}), freed: make(chan struct{}), heard: time.Now(), front: map[int]int64{}}
	// A fetch returns as soon as a record is there (MinBytes 1), so MaxWait is only how
	// often an idle partition is polled: each poll is a request, a wake-up and, when
	// kafka-go's deadline fires first, a reconnection, all on the primary's CPU.
	// Independent: each partition is filed by a goroutine of its own, so a partition
	// whose share is full waits alone (see the package doc, "Bounds and offsets").
	r, err := stream.NewReader(stream.ReaderConfig{Kafka: c.Kafka, Topics: []string{c.Topic}, Start: fromFirst,
		MaxBatch: 256, MaxWait: idlePoll, FetchMaxBytes: c.FetchMaxBytes, Independent: true})
	if err != nil {
		return nil, err
	}
	s.r = r
	return s, nil
}

// fromFirst starts every features partition at its first retained offset.
func fromFirst(string, int) (int64, bool, error) { return 0, false, nil }

// Run reads the features topic until ctx ends, restarting the reader after a failure
// (fault.Tracker KeepReading, component "features"). It returns nil once ctx ends.
func (s *Source) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if s.cfg.Publish != nil {
		wg.Go(func() { s.publish(ctx) })
	}
	err := s.cfg.Faults.KeepReading(ctx, "features", reader{s}, s.handle, nil)
	wg.Wait()
	return err
}

// publishEvery is how often Run publishes the applied offsets (Config.Publish): a
// featurizer then computes at most this much of what the primary applied itself.
const publishEvery = 500 * time.Millisecond

// publish publishes the applied offsets of the training topic while the daemon leads,
// each time they moved, until ctx ends. A failure is logged (the first of a run of
// them) and the next tick tries again: featurizers that miss an update only compute
// rows the primary has.
func (s *Source) publish(ctx context.Context) {
	tick := time.NewTicker(publishEvery)
	defer tick.Stop()
	var (
		pr     *stream.Progress
		parts  []int
		last   map[int]int64
		failed bool
	)
	defer func() {
		if pr != nil {
			pr.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !s.cfg.Publish() {
			continue
		}
		var err error
		if pr == nil {
			pr, err = stream.NewProgress(s.cfg.Kafka, featrec.AppliedGroup, s.cfg.Train)
		}
		if err == nil && parts == nil {
			parts, err = stream.Partitions(ctx, s.cfg.Kafka, s.cfg.Train)
		}
		var next map[int]int64
		if err == nil {
			next, err = s.nextOffsets(parts)
		}
		if err == nil && !maps.Equal(next, last) {
			if err = pr.Publish(ctx, next); err == nil {
				last = next
			}
		}
		if err != nil && !failed && ctx.Err() == nil {
			s.cfg.Log.Warn().Err(err).Msg("featsource: publishing the applied offsets failed; retrying")
		}
		failed = err != nil
	}
}

// nextOffsets is, per training partition with an applied offset, the offset after it.
func (s *Source) nextOffsets(parts []int) (map[int]int64, error) {
	next := make(map[int]int64, len(parts))
	for _, p := range parts {
		last, ok, err := s.cfg.Applied(s.cfg.Train, p)
		if err != nil {
			return nil, err
		}
		if ok {
			next[p] = last + 1
		}
	}
	return next, nil
}

// EnsureTopic creates the features topic when it is missing, with as many partitions as
// the training topic train (a record sits on its event's partition) and featrec's
// settings (TopicConfigs), and returns train's partitions. The featurizers and the
// primary both call it, whichever starts first.
func EnsureTopic(ctx context.Context, kc stream.Config, train, topic string) ([]int, error) {
	parts, err := stream.Partitions(ctx, kc, train)
	if err != nil {
		return nil, fmt.Errorf("featsource: partitions of %s: %w", train, err)
	}
	if err := stream.EnsureTopicsWithConfigs(ctx, kc, len(parts), 1, featrec.TopicConfigs(), topic); err != nil {
		return nil, fmt.Errorf("featsource: create %s: %w", topic, err)
	}
	return parts, nil
}

// reader creates the features topic if needed, reads the training partitions' floors,
// and runs the stream reader.
type reader struct{ s *Source }

func (r reader) Run(ctx context.Context, h stream.Handler) error {
	s := r.s
	parts, err := EnsureTopic(ctx, s.cfg.Kafka, s.cfg.Train, s.cfg.Topic)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.share = max(s.cfg.MaxBytes/max(len(parts), 1), 1)
	err = s.readFloors(parts)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.cfg.Log.Info().Str("topic", s.cfg.Topic).Int("partitions", len(parts)).Msg("reading the featurizers' records")
	return s.r.Run(ctx, h)
}

// handle files one batch of the features topic under one hold of the lock, and wakes a
// waiting Lookup once for the batch rather than once per record: the records of a batch
// come together, and each wake-up re-runs the Lookup's take over its whole batch.
func (s *Source) handle(ctx context.Context, batch []stream.Message) error {
	s.mu.Lock()
	var err error
	for _, m := range batch {
		if err = s.file(ctx, m); err != nil {
			break
		}
	}
	s.wake()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.cfg.Faults.Recovered("features")
	return nil
}

// wake tells a waiting Lookup that records were filed since the last call, with s.mu
// held.
func (s *Source) wake() {
	if s.unwoken {
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.unwoken = false
	}
}

// file keeps m for the Lookup of its training event, after waiting for room, with s.mu
// held (released while waiting); handle wakes the Lookup.
func (s *Source) file(ctx context.Context, m stream.Message) error {
	topic, part, off, err := featrec.Peek(m.Value)
	if err == nil && topic != s.cfg.Train {
		s.stats.Other++ // another deployment's, sharing the features topic
		return nil
	}
	if err != nil {
		if len(s.refused) < maxRefused {
			s.refused = append(s.refused, m)
		} else {
			s.stats.Dropped++
		}
		return nil
	}
	if err := s.waitRoom(ctx, part, len(m.Value)); err != nil {
		return err
	}
	s.heard = time.Now()
	if f, ok := s.front[part]; !ok || off > f {
		s.front[part] = off
	}
	if f, ok := s.floor[part]; ok && off <= f {
		s.stats.Stale++
		return nil
	}
	k := key{part, off}
	if len(s.recs[k]) >= maxPerEvent {
		s.stats.Dropped++
		return nil
	}
	s.recs[k] = append(s.recs[k], m)
	s.held[part] += len(m.Value)
	s.stats.Filed++
	s.unwoken = true
	return nil
}

// waitRoom waits, with s.mu held (released while waiting), until n more bytes of
// training partition part fit its share: it re-reads the partition's floor (records
// applied meanwhile leave) and otherwise waits for a Lookup to take or pass records. A
// record larger than the share is let in when its partition holds nothing else. Only
// part's goroutine waits (the reader is Independent): the other partitions are filed
// meanwhile, so a primary that needs one partition's records is never held up by
// another's filling the buffer.
func (s *Source) waitRoom(ctx context.Context, part, n int) error {
	for s.held[part] > 0 && s.held[part]+n > s.share {
		if err := s.readFloors([]int{part}); err != nil {
			return err
		}
		if s.held[part] == 0 || s.held[part]+n <= s.share {
			return nil
		}
		s.wake() // the records filed so far may be what the Lookup that frees room waits for
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-freed:
		case <-time.After(100 * time.Millisecond):
		}
		s.mu.Lock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// readFloors raises the floors of parts to their applied offsets (Config.Applied) and
// drops what is below, with s.mu held.
func (s *Source) readFloors(parts []int) error {
	for _, p := range parts {
		last, ok, err := s.cfg.Applied(s.cfg.Train, p)
		if err != nil {
			return fmt.Errorf("featsource: applied offset of %s/%d: %w", s.cfg.Train, p, err)
		}
		if f, had := s.floor[p]; ok && (!had || last > f) {
			s.floor[p] = last
		}
	}
	s.prune()
	return nil
}

// prune drops the records at or below their partition's floor, with s.mu held.
func (s *Source) prune() {
	dropped := false
	for k, ms := range s.recs {
		if f, ok := s.floor[k.part]; ok && k.off <= f {
			for _, m := range ms {
				s.held[k.part] -= len(m.Value)
			}
			s.stats.Stale += uint64(len(ms))
			delete(s.recs, k)
			dropped = true
		}
	}
	if dropped {
		close(s.freed)
		s.freed = make(chan struct{})
	}
}

// Lookup implements ingest.FeatureSource: see its doc and the package doc "Waiting".
// Requests of another topic than the training topic get nothing.
func (s *Source) Lookup(ctx context.Context, patience time.Duration, want []ingest.FeatureRequest, got [][]stream.Message) []stream.Message {
	if len(got) != len(want) {
		panic(fmt.Sprintf("featsource: Lookup with %d requests and %d results", len(want), len(got)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	progress := time.Now() // the call, then the last record handed over
	for {
		missing, moved := s.take(want, got)
		if missing == 0 {
			break
		}
		if moved {
			progress = time.Now()
		}
		wake := s.heard.Add(s.cfg.Quiet)
		if end := progress.Add(patience); end.Before(wake) {
			wake = end
		}
		wait := time.Until(wake)
		if wait <= 0 || ctx.Err() != nil {
			break
		}
		arrived := s.arrived
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-arrived:
		}
		t.Stop()
		s.mu.Lock()
	}
	for _, w := range want {
		if f, ok := s.floor[w.Partition]; w.Topic == s.cfg.Train && (!ok || w.Offset > f) {
			s.floor[w.Partition] = w.Offset
		}
	}
	s.prune()
	refused := s.refused
	s.refused = nil
	return refused
}

// take moves the records held for the requests still without one into got, and
// returns how many of those left without one may still get one (the featurizers have
// not written a record at or past its offset on its partition yet: they write a
// partition's records in offset order, so a record behind their front is not coming,
// but after a rebalance) and whether it moved any. It is called with s.mu held.
func (s *Source) take(want []ingest.FeatureRequest, got [][]stream.Message) (missing int, moved bool) {
	for i, w := range want {
		if got[i] != nil {
			continue
		}
		if w.Topic != s.cfg.Train {
			continue // no featurizer writes records of it
		}
		k := key{w.Partition, w.Offset}
		ms, ok := s.recs[k]
		if !ok {
			if f, seen := s.front[w.Partition]; !seen || w.Offset > f {
				missing++
			}
			continue
		}
		got[i] = ms
		delete(s.recs, k)
		for _, m := range ms {
			s.held[k.part] -= len(m.Value)
		}
		s.stats.Taken += uint64(len(ms))
		moved = true
	}
	if moved {
		close(s.freed)
		s.freed = make(chan struct{})
	}
	return missing, moved
}

// Stats returns the counts so far.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Held = len(s.recs)
	return st
}
