package daemon

import (
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lineage"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
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
// none until it leads.

// producerBase is the producer URI of a build without a module version.
const producerBase = "https://github.com/cairnhq/cairn"

// producer is the deployment's lineage producer: the cairn build and the Kafka namespace
// of its topics (the first bootstrap broker, OpenLineage's naming for Kafka).
func (d *Daemon) producer() lineage.Producer {
	uri := producerBase
	if bi, ok := debug.ReadBuildInfo(); ok && strings.HasPrefix(bi.Main.Version, "v") {
		uri += "/tree/" + bi.Main.Version
	}
	broker := d.cfg.Kafka.EmbeddedBroker
	if len(d.kafka.Brokers) > 0 {
		broker = d.kafka.Brokers[0]
	}
	return lineage.Producer{URI: uri, Kafka: "kafka://" + broker}
}

// lineageJob is the job of a kind of run ("refit", "erasure"): lineage.job + "." + kind
// in lineage.namespace.
func (d *Daemon) lineageJob(kind string) lineage.Job {
	return lineage.Job{Namespace: d.cfg.Lineage.Namespace, Name: d.cfg.Lineage.Job + "." + kind}
}

// refitRun is the refit about to start on the snapshot being taken (d.train.mu held,
// so the stored offsets are those the snapshot's points reflect): the training topic
// from offset 0 to the last applied, per partition, and the serving model's version.
func (d *Daemon) refitRun() (lineage.Refit, error) {
	topic := d.cfg.Kafka.Topics.Train
	r := lineage.Refit{Job: d.lineageJob("refit"), Train: lineage.Topic{Name: topic}}
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

// enqueueLineage writes ev to the lineage topic in tx, keyed by its run id.
func (d *Daemon) enqueueLineage(tx *storage.Tx, ev lineage.RunEvent, err error) error {
	if err != nil {
		return err
	}
	b, err := ev.Encode()
	if err != nil {
		return err
	}
	_, err = tx.Enqueue(d.cfg.Kafka.Topics.Lineage, []byte(ev.Run.RunID), b)
	return err
}

// refitStarted commits the START of refit r, when this daemon leads, and reports
// whether it did.
func (d *Daemon) refitStarted(r lineage.Refit) (bool, error) {
	if !d.leading.Load() {
		return false, nil
	}
	p := d.producer()
	err := d.store.Apply(func(tx *storage.Tx) error {
		ev, err := p.RefitStart(r, tx.Time())
		return d.enqueueLineage(tx, ev, err)
	})
	if err != nil {
		return false, fmt.Errorf("daemon: lineage START of refit %s: %w", r.RunID(), err)
	}
	return true, nil
}

// refitFailed commits the FAIL of refit r, which failed with cause; a failure to write
// it is logged (the refit's own error is what the supervisor reports).
func (d *Daemon) refitFailed(r lineage.Refit, cause error) {
	p := d.producer()
	err := d.store.Apply(func(tx *storage.Tx) error {
		ev, err := p.RefitFail(r, cause.Error(), tx.Time())
		return d.enqueueLineage(tx, ev, err)
	})
	if err != nil {
		d.log.Warn().Err(err).Str("run", r.RunID()).Msg("lineage FAIL of a refit not written")
	}
}

// refitCompleted writes, in the refit's transaction tx, the COMPLETE of its run and of
// every erasure it audited (the last record of each).
func (d *Daemon) refitCompleted(tx *storage.Tx, r lineage.Refit, c *refitCommit) error {
	p := d.producer()
	out := lineage.Outcome{Models: d.cfg.Kafka.Topics.Models, Version: c.version, ModelID: c.ft.Meta.ID}
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
	ev, err := p.RefitComplete(r, out, tx.Time())
	if err := d.enqueueLineage(tx, ev, err); err != nil {
		return err
	}
	for i, rec := range c.audited {
		if err := d.erasureCompleted(tx, rec, c.audits[i], c.ft.Serving.Version, c.ft.Serving.ID); err != nil {
			return err
		}
	}
	return nil
}

// erasureRun is the erasure run of an erasure record, and whether rec is one (its
// source, the request's coordinates topic/partition/offset, names the erasures topic
// and the request's offset).
func (d *Daemon) erasureRun(rec *ingest.Deletion) (lineage.Erasure, bool) {
	if rec.Kind != ingest.KindErasure {
		return lineage.Erasure{}, false
	}
	e := lineage.Erasure{Job: d.lineageJob("erasure"), Request: rec.Request, SubjectHash: rec.Subject}
	i := strings.LastIndexByte(rec.Source, '/')
	j := strings.LastIndexByte(rec.Source[:max(i, 0)], '/')
	if j <= 0 {
		e.Erasures.Name = rec.Source
		return e, true
	}
	part, perr := strconv.Atoi(rec.Source[j+1 : i])
	off, oerr := strconv.ParseInt(rec.Source[i+1:], 10, 64)
	e.Erasures.Name = rec.Source[:j]
	if perr == nil && oerr == nil {
		e.Erasures.Offsets = []lineage.Offsets{{Partition: part, First: off, Last: off}}
	}
	return e, true
}

// erasureStarted writes, in tx, the START of the erasure of rec (nothing for another
// kind of record, or a part of a request after its first).
func (d *Daemon) erasureStarted(tx *storage.Tx, rec *ingest.Deletion) error {
	e, ok := d.erasureRun(rec)
	if !ok || rec.Part > 1 {
		return nil
	}
	ev, err := d.producer().ErasureStart(e, tx.Time())
	return d.enqueueLineage(tx, ev, err)
}

// erasureCompleted writes, in tx, the COMPLETE of the erasure of rec, audited by a (the
// last part of a request with several; nothing for another kind of record), with the
// model serving after it.
func (d *Daemon) erasureCompleted(tx *storage.Tx, rec *ingest.Deletion, a stream.Audit, version uint64, modelID string) error {
	e, ok := d.erasureRun(rec)
	if !ok || rec.Part < rec.Parts {
		return nil
	}
	points := len(rec.Points) + max(rec.Parts-1, 0)*ingest.MaxErasurePoints
	out := lineage.Outcome{Models: d.cfg.Kafka.Topics.Models, Version: version, ModelID: modelID, Points: &points,
		Audits: d.cfg.Kafka.Topics.Audits, AuditSeq: a.Seq, AuditHash: a.Hash}
	ev, err := d.producer().ErasureComplete(e, out, tx.Time())
	return d.enqueueLineage(tx, ev, err)
}

// lineageState is what the training batch being applied knows of its erasures (under
// d.train.mu): the erasure records its plan made (the Describe hook), by their source
// coordinates, and whether their START is written (a record audited at once by the
// Unknown hook writes it with its audit).
type lineageState struct {
	planned map[string]*plannedErasure
}

type plannedErasure struct {
	rec     *ingest.Deletion
	started bool
}

// describeRecord is the ingest's Describe hook: describe, and for an erasure's record
// the note that the batch plans it.
func (d *Daemon) describeRecord(rec *ingest.Deletion) {
	d.describe(rec)
	if rec.Kind != ingest.KindErasure || rec.Part > 1 {
		return
	}
	if d.lineage.planned == nil {
		d.lineage.planned = map[string]*plannedErasure{}
	}
	d.lineage.planned[rec.Source] = &plannedErasure{rec: rec}
}

// commitBatch is the ingest's Commit hook, last in every batch transaction that writes
// state: the serving mask (commitMask), then, while this daemon leads, the START of
// each erasure the batch applies whose START its audit did not write already. A batch
// that is planned again (a retried transaction) notes its erasures again.
func (d *Daemon) commitBatch(tx *storage.Tx) error {
	if err := d.commitMask(tx); err != nil {
		return err
	}
	planned := d.lineage.planned
	d.lineage.planned = nil
	if !d.leading.Load() {
		return nil
	}
	for _, src := range slices.Sorted(maps.Keys(planned)) {
		if p := planned[src]; !p.started {
			if err := d.erasureStarted(tx, p.rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// erasureAuditedAtOnce writes, in tx, the START of the erasure of rec, which its
// request's own transaction audits (it erased nothing), before the audit; complete
// writes its COMPLETE after.
func (d *Daemon) erasureAuditedAtOnce(tx *storage.Tx, rec *ingest.Deletion) (complete func(a stream.Audit) error, err error) {
	if rec.Kind != ingest.KindErasure {
		return func(stream.Audit) error { return nil }, nil
	}
	if p := d.lineage.planned[rec.Source]; p != nil {
		p.started = true
	}
	if err := d.erasureStarted(tx, rec); err != nil {
		return nil, err
	}
	return func(a stream.Audit) error {
		var version uint64
		var id string
		if s := d.serve.model.Load(); s != nil {
			version, id = s.Version, s.ID
		}
		return d.erasureCompleted(tx, rec, a, version, id)
	}, nil
}
