package daemon

import (
	"fmt"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lineage"
	"github.com/cairnhq/cairn/storage"
)

// Lineage (internal/lineage): the leader writes an OpenLineage RunEvent START and then
// COMPLETE or FAIL for every refit and every erasure to kafka.topics.lineage, keyed by
// run id, through the outbox, so they carry the CloudEvents headers of every record and
// go out at least once, in commit order, with the records they report:
//
//   - a refit's START is committed in a transaction of its own when the refit begins
//     (no transaction exists then, and the fit that follows runs outside the store);
//     its COMPLETE in the refit's own transaction, with the model, its audits and the
//     chain head; a FAIL in a transaction of its own when the refit returns an error.
//     A refit cut short by a stop writes no FAIL: the next start refits the same
//     inputs after the same model, which is the same run id, and its COMPLETE closes
//     the run.
//   - an erasure's START is committed in the transaction that applies the request (the
//     ingest's Commit hook), its COMPLETE in the transaction of its audit (the refit's,
//     or the request's own when it erased nothing). An erasure does not fail: a failed
//     refit leaves it pending, and the refit that audits it completes it.
//
// Every event's time is its transaction's (storage.Tx.Time), which is also its ce_time.
// Run ids are lineage's (Refit.RunID, Erasure.RunID): a refit is named by the training
// topic's offsets applied when its snapshot was taken and the model serving then, an
// erasure by its request, its subject's hash and the request's offset. A standby writes
// none until it leads. The events themselves are lineage.Recorder's (d.lineage).

// refitRun is the refit about to start on the snapshot being taken (d.train.mu held,
// so the stored offsets are those the snapshot's points reflect): the training topic
// from offset 0 to the last applied, per partition, and the serving model's version.
func (d *Daemon) refitRun() (lineage.Refit, error) {
	topic := d.cfg.Kafka.Topics.Train
	r := lineage.Refit{Job: d.lineage.JobOf("refit"), Train: lineage.Topic{Name: topic}}
	if s := d.serve.model.Load(); s != nil {
		r.Previous = s.Version
	}
	err := d.store.View(func(tx *storage.ReadTx) error {
		offs, err := tx.Offsets()
		for _, o := range offs {
			if o.Topic == topic && o.Offset >= 0 {
				r.Train.Offsets = append(r.Train.Offsets, lineage.Offsets{Partition: int(o.Partition), Last: o.Offset})
			}
		}
		return err
	})
	return r, err
}

// refitStarted commits the START of refit r, when this daemon leads, and reports
// whether it did.
func (d *Daemon) refitStarted(r lineage.Refit) (bool, error) {
	if !d.leading.Load() {
		return false, nil
	}
	err := d.store.Apply(func(tx *storage.Tx) error { return d.lineage.RefitStart(tx, r) })
	if err != nil {
		return false, fmt.Errorf("daemon: lineage START of refit %s: %w", r.RunID(), err)
	}
	return true, nil
}

// refitFailed commits the FAIL of refit r, which failed with cause; a failure to write
// it is logged (the refit's own error is what the supervisor reports).
func (d *Daemon) refitFailed(r lineage.Refit, cause error) {
	err := d.store.Apply(func(tx *storage.Tx) error { return d.lineage.RefitFail(tx, r, cause) })
	if err != nil {
		d.log.Warn().Err(err).Str("run", r.RunID()).Msg("lineage FAIL of a refit not written")
	}
}

// refitCompleted writes, in the refit's transaction tx, the COMPLETE of its run and of
// every erasure it audited (the last record of each).
func (d *Daemon) refitCompleted(tx *storage.Tx, r lineage.Refit, c *refitCommit) error {
	out := lineage.Outcome{Version: c.version, ModelID: c.ft.Meta.ID}
	for v, res := range c.ft.Meta.Residual {
		out.Residual = append(out.Residual, lineage.ViewResidual{View: string(rune('A' + v)), TraceR: res.TraceR, TraceK: res.TraceK, Exact: res.Exact})
	}
	if cov := d.feat.Coverage(); cov != nil {
		share := cov.Share()
		out.Coverage = &share
	}
	if n := len(c.audits); n > 0 {
		out.Audits, out.AuditSeq, out.AuditHash = d.cfg.Kafka.Topics.Audits, c.audits[n-1].Seq, c.audits[n-1].Hash
	}
	return d.lineage.RefitComplete(tx, r, out, c.audited, c.audits, c.ft.Serving.Version, c.ft.Serving.ID)
}

// describeRecord is the ingest's Describe hook: describe, and for an erasure's record
// the note that the batch plans it.
func (d *Daemon) describeRecord(rec *ingest.Deletion) {
	d.describe(rec)
	d.lineage.Plan(rec)
}

// commitBatch is the ingest's Commit hook, last in every batch transaction that writes
// state: the serving mask (commitMask), then, while this daemon leads, the START of
// each erasure the batch applies whose START its audit did not write already.
func (d *Daemon) commitBatch(tx *storage.Tx) error {
	if err := d.commitMask(tx); err != nil {
		return err
	}
	return d.lineage.CommitPlanned(tx, d.leading.Load())
}

// servingVersion is the serving model's version and id (zero when none serves).
func (d *Daemon) servingVersion() (uint64, string) {
	if s := d.serve.model.Load(); s != nil {
		return s.Version, s.ID
	}
	return 0, ""
}
