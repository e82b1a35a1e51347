package daemon

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/role/standby"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// leader is what the leading daemon runs besides what every daemon with a store runs
// (ingest, refits, lag): the outbox's publisher, the writer of the model publisher, and
// the query reader when query.on_primary is set.
type leader struct {
	pub     *stream.Publisher
	w       *stream.Writer
	queries *stream.Reader
}

// lead runs the leader's components until ctx ends (shutdown, or, when elected, the
// loss of the leadership). An elected leader (standby.Candidate, which took over
// first) leads from now on and runs its publisher itself; a primary on the embedded
// broker leads from its start and Run owns its publisher, so that the outbox drains
// after the readers stop.
func (d *Daemon) lead(ctx context.Context, l leader, elected bool) {
	if elected {
		d.leading.Store(true)
		defer d.leading.Store(false)
		d.emitStatus("audit_key", d.AuditKey())
	}
	d.metrics.SetLeading(true)
	defer d.metrics.SetLeading(false)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.models.pub.Run(ctx, l.w); err != nil {
			d.log.Error().Err(err).Msg("model publisher stopped")
		}
	})
	if d.cfg.Query.OnPrimary {
		wg.Go(func() {
			if err := d.faults.KeepReading(ctx, "queries", l.queries, d.handleQueries, nil); err != nil {
				d.log.Error().Err(err).Msg("query reader stopped")
			}
		})
	}
	if elected {
		wg.Go(func() {
			if err := l.pub.Run(ctx); err != nil {
				d.log.Error().Err(err).Msg("publisher stopped")
			}
		})
	}
	d.poke()
	wg.Wait()
}

// candidate is this daemon in the leader election with external brokers
// (internal/role/standby): it adopts the leader's audits while it follows, and once
// elected hands over (handover) and leads.
func (d *Daemon) candidate(l leader) (*standby.Candidate, *standby.Adopter, error) {
	ad := d.newAdopter()
	c, err := standby.NewCandidate(standby.CandidateConfig{
		Election: stream.ElectionConfig{Kafka: d.kafka, Group: d.cfg.Kafka.LeaderGroup, Topic: d.cfg.Kafka.Topics.Leader,
			SessionTimeout: d.cfg.Kafka.SessionTimeout, Preferred: d.cfg.Role == "primary"},
		Adopter: ad, Handover: d.handover, Lead: func(c context.Context) { d.lead(c, l, true) },
		Floor: d.models.floor.Load, Faults: d.faults, Metrics: d.metrics, Log: d.log})
	return c, ad, err
}

// newAdopter is the adopter of the leader's audits into this daemon's chain.
func (d *Daemon) newAdopter() *standby.Adopter {
	return standby.NewAdopter(standby.AdopterConfig{Kafka: d.kafka, Topic: d.cfg.Kafka.Topics.Audits,
		Train: d.cfg.Kafka.Topics.Train, Key: d.signer, Chain: chain{d}, Leading: d.leading.Load,
		Faults: d.faults, Metrics: d.metrics, Log: d.log})
}

// handover makes an elected standby ready to lead once it adopted every audit the
// previous leader published: it masks every pending deletion in the serving model (a
// model from the models topic, which the previous leader may not have masked yet) and
// enqueues that mask, so it goes out first. It returns the number of pending deletions.
func (d *Daemon) handover() (int, error) {
	d.train.mu.Lock()
	ids := d.train.ingest.PendingIDs()
	// The serving model came from the models topic (or from before the leadership was
	// lost); when the store's own latest fit differs from it, a refit brings the served
	// model up to the stored points and publishes it (the idle trigger).
	if s := d.serve.model.Load(); s == nil || d.latestStoredID() != s.ID {
		d.train.changes = max(d.train.changes, 1)
	}
	d.train.mu.Unlock()
	d.serve.mu.Lock()
	s := d.serve.model.Load()
	if s != nil {
		s = s.WithMask(ids)
		d.serve.model.Store(s)
	}
	d.serve.mu.Unlock()
	if s != nil {
		m := modelbus.Mask(s.Version, s.MaskedIDs())
		if err := d.store.Apply(func(tx *storage.Tx) error {
			_, err := tx.Enqueue(d.cfg.Kafka.Topics.Models, m.Key, m.Value)
			return err
		}); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// latestStoredID is the model id of the store's latest model ("" for none or unreadable).
func (d *Daemon) latestStoredID() string {
	var id string
	_ = d.store.View(func(tx *storage.ReadTx) error {
		m, ok, err := tx.LatestModel()
		var meta serving.Meta
		if ok && json.Unmarshal(m.Meta, &meta) == nil {
			id = meta.ID
		}
		return err
	})
	return id
}

// chain is the daemon's audit chain and ingest as a standby's adopter extends them
// (standby.Chain).
type chain struct{ d *Daemon }

// Head implements standby.Chain.
func (c chain) Head() (storage.AuditLink, error) {
	var head storage.AuditLink
	err := c.d.store.View(func(tx *storage.ReadTx) error {
		var err error
		head, _, err = tx.AuditHead()
		return err
	})
	return head, err
}

// Applied implements standby.Chain.
func (c chain) Applied(topic string, part int) (int64, bool) {
	c.d.train.mu.Lock()
	defer c.d.train.mu.Unlock()
	return c.d.train.ingest.Applied(topic, part)
}

// Adopt implements standby.Chain.
func (c chain) Adopt(body []byte, request, id string, hash [32]byte) error {
	c.d.train.mu.Lock()
	defer c.d.train.mu.Unlock()
	_, err := c.d.train.ingest.AdoptAudit(body, request, id, hash)
	c.d.publishPool()
	return err
}
