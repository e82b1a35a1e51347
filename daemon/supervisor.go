package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// runRefits is the refit supervisor: every 100 ms, or when the train handler pokes it,
// it starts a refit when a drift trigger fires (refit.Reason), or else a background pool
// sync when one is due (refit.SyncDue). Both take a snapshot under the ingest lock (pointers
// to the cached points, O(n)) and do their O(n q m) work without it, on this goroutine,
// so ingestion and queries never wait for them; one runs at a time. A failure (a commit
// the store refused, a broken ingest, which it rebuilds) never ends it: the job is
// retried after a doubling wait (faults.go).
func (d *Daemon) runRefits(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var b fault.Backoff
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.refits.kick:
		}
		reason, err := d.runJob(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			b.Reset()
			d.faults.Recovered("refit")
			continue
		}
		wait := b.Next()
		d.faults.Fail("refit", fmt.Errorf("%s: %w", cmp.Or(reason, "sync"), err), wait)
		if errors.Is(err, ErrBroken) {
			if rerr := d.rebuildIngest(); rerr != nil {
				d.faults.Fail("refit", rerr, wait)
			}
		}
		d.train.mu.Lock()
		d.train.changes = max(d.train.changes, 1)
		d.train.retryAt = time.Now().Add(wait)
		d.train.mu.Unlock()
	}
}

// runJob runs the next refit or sync, if one is due, and returns its reason ("" for a
// sync) and error.
func (d *Daemon) runJob(ctx context.Context) (string, error) {
	snap, err := d.nextJob(ctx)
	if err != nil || snap == nil {
		return "", err
	}
	start := time.Now()
	if snap.reason == "" {
		_, err = d.syncSnapshot(ctx, snap)
		return "", err
	}
	d.refits.running.Store(true)
	err = d.refit(ctx, snap)
	d.refits.running.Store(false)
	if err != nil {
		if ctx.Err() != nil {
			err = context.Canceled
		}
		d.metrics.ObserveRefit(time.Since(start).Seconds(), err)
	}
	return snap.reason, err
}

// nextJob returns the snapshot of the next refit (reason set) or background sync
// (reason empty), or nil when nothing is due.
func (d *Daemon) nextJob(ctx context.Context) (*job, error) {
	d.train.mu.Lock()
	defer d.train.mu.Unlock()
	in := d.train.ingest
	if time.Now().Before(d.train.retryAt) {
		return nil, nil
	}
	dr := refit.Drift{Changes: d.train.changes, LastTrain: d.train.lastTrain, LastFit: d.train.lastFit,
		LastSyncN: d.train.lastSyncN, Leading: d.leading.Load(), HasModel: d.serve.model.Load() != nil,
		CaughtUp: func() bool { return d.caughtUp(ctx) }, Backlog: d.trainBacklog, HeldSince: d.train.heldSince,
		OwnFit: func() bool { s := d.serve.model.Load(); return s != nil && d.latestStoredID() == s.ID }}
	reason := refit.Reason(d.cfg.Refit, in, dr, time.Now())
	if refit.Hold(d.cfg.Refit, reason, dr, time.Now()) {
		d.train.heldSince, reason = cmp.Or(d.train.heldSince, time.Now()), ""
	} else {
		d.train.heldSince = time.Time{} // a held trigger that no longer fires starts over
	}
	if reason == "" && !refit.SyncDue(d.cfg.Refit, in, dr) {
		return nil, nil
	}
	s, err := in.Snapshot()
	if err != nil {
		return nil, err
	}
	snap := &job{Snapshot: s, reason: reason}
	if reason != "" {
		if snap.run, err = d.refitRun(); err != nil {
			return nil, err
		}
	}
	d.serve.mu.Lock()
	snap.mark = len(d.serve.removals)
	d.serve.mu.Unlock()
	if reason != "" {
		d.emitStatus("drift", map[string]any{"reason": reason, "changes": d.train.changes, "points": len(snap.IDs),
			"pending_deletions": len(snap.Pending), "residual_ratio": refit.Ratio(snap.Residual),
			"residual_ratio_at_last_fit": d.train.lastFit.Ratio})
		d.train.changes = 0
	}
	return snap, nil
}

// certificateStatus is the data of a "certificate" status event: the pool's residual
// certificate per view (d.train.mu held).
func (d *Daemon) certificateStatus(why string) map[string]any {
	r := d.train.ingest.Residuals()
	return map[string]any{"why": why, "points": d.train.ingest.Len(),
		"residual": [2]certify.Residual{serving.ResidualOf(r[0]), serving.ResidualOf(r[1])}, "stale": [2]bool{r[0].Stale, r[1].Stale}}
}

// emitStatus commits one cairn.status event through the outbox; a failure is logged,
// not fatal (status events are informational).
func (d *Daemon) emitStatus(kind string, data any) {
	if d.store == nil { // a replica: no outbox, written at once
		d.emitDirect(kind, data)
		return
	}
	if !d.leading.Load() {
		return // a standby publishes nothing
	}
	err := d.store.Apply(func(tx *storage.Tx) error { return statusEvent(tx, d.cfg.Kafka.Topics.Status, kind, data) })
	if err != nil {
		d.log.Warn().Err(err).Str("kind", kind).Msg("status event not written")
	}
}

// trainBacklog is the training topic's lag at the last poll (runLag), over its partitions.
func (d *Daemon) trainBacklog() int64 { return d.lag.TopicLag(d.cfg.Kafka.Topics.Train) }

// caughtUp reports whether every message of the training topic has been applied:
// the broker's end offsets against the ingest's applied offsets. d.train.mu is held. A
// broker that does not answer counts as not caught up.
func (d *Daemon) caughtUp(ctx context.Context) bool {
	topic := d.cfg.Kafka.Topics.Train
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := stream.EndOffsets(lctx, d.kafka, topic)
	if err != nil {
		return false
	}
	for part, end := range ends {
		last, ok := d.train.ingest.Applied(topic, part)
		if end > 0 && (!ok || last+1 < end) {
			return false
		}
	}
	return true
}

// withTombstone is rec as its audit in tx states it: with where its tombstones landed
// (ingest.Outbox.WithTombstones: a deletion's, or each of an erasure's points) when it
// does not say yet. rec is not modified, so that a transaction that fails and runs
// again looks again.
func (d *Daemon) withTombstone(tx *storage.Tx, rec *ingest.Deletion) (*ingest.Deletion, error) {
	return d.box.WithTombstones(tx, rec)
}

// auditWithoutModel answers pending deletions when too few points are left to fit:
// the audits say model_after 0 and the serving model is withdrawn.
func (d *Daemon) auditWithoutModel(snap *job) error {
	if !d.leading.Load() {
		return nil // a standby adopts the leader's audits (internal/role/standby)
	}
	done := time.Now()
	err := d.store.Apply(func(tx *storage.Tx) error {
		var last stream.Audit
		for _, rec := range snap.Pending {
			audit, err := d.withTombstone(tx, rec)
			if err != nil {
				return err
			}
			a, err := ingest.AppendAudit(tx, d.cfg.Kafka.Topics.Audits, audit, nil, done, d.signer)
			if err != nil {
				return err
			}
			last = a
			if _, err := tx.DeletePending(rec.Seq); err != nil {
				return err
			}
			if err := d.lineage.ErasureComplete(tx, rec, a, 0, ""); err != nil { // no model serves after it
				return err
			}
		}
		if last.Seq > 0 {
			if err := d.checkpoint(tx, last); err != nil {
				return err
			}
		}
		return statusEvent(tx, d.cfg.Kafka.Topics.Status, "model", map[string]any{
			"version": 0, "points": len(snap.IDs), "reason": "fewer stored points than refit.min_points: no model"})
	})
	if err != nil {
		return err
	}
	d.serve.mu.Lock()
	d.serve.model.Store(nil)
	d.serve.removals = d.serve.removals[:0]
	d.serve.mu.Unlock()
	d.metrics.SetModel(0, 0)
	d.train.mu.Lock()
	d.train.ingest.DropPending(snap.Pending)
	d.publishPool()
	d.train.mu.Unlock()
	return nil
}
