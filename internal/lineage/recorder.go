package lineage

import (
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// producerBase is the producer URI of a build without a module version.
const producerBase = "https://github.com/cairnhq/cairn"

// Build is the lineage producer of this cairn build (its module version, when it has
// one) on the Kafka cluster whose first bootstrap broker is broker (OpenLineage's
// naming for Kafka).
func Build(broker string) Producer {
	uri := producerBase
	if bi, ok := debug.ReadBuildInfo(); ok && strings.HasPrefix(bi.Main.Version, "v") {
		uri += "/tree/" + bi.Main.Version
	}
	return Producer{URI: uri, Kafka: "kafka://" + broker}
}

// Tx is the transaction a Recorder writes its events in (storage.Tx): its time, which
// is each event's time, and the outbox.
type Tx interface {
	Time() time.Time
	Enqueue(topic string, key, value []byte) (uint64, error)
}

// Recorder writes a deployment's RunEvents of refits and erasures to its lineage topic,
// keyed by run id, in the transactions it is given (the outbox). Its fields are set
// before its first use and not changed after; the planned erasures it keeps are the
// training batch's being applied, so a Recorder is used by one goroutine at a time
// (the daemon's train.mu).
type Recorder struct {
	// Producer is the deployment's producer (Build).
	Producer Producer
	// Namespace and Job name the jobs: Job + "." + kind ("refit", "erasure") in
	// Namespace.
	Namespace, Job string
	// Lineage, Models and Audits are the topics of the events, of the models and of
	// the audit records.
	Lineage, Models, Audits string

	planned map[string]*plannedErasure
}

type plannedErasure struct {
	rec     *ingest.Deletion
	started bool
}

// JobOf is the job of a kind of run ("refit", "erasure").
func (r *Recorder) JobOf(kind string) Job {
	return Job{Namespace: r.Namespace, Name: r.Job + "." + kind}
}

// enqueue writes ev to the lineage topic in tx, keyed by its run id.
func (r *Recorder) enqueue(tx Tx, ev RunEvent, err error) error {
	if err != nil {
		return err
	}
	b, err := ev.Encode()
	if err != nil {
		return err
	}
	_, err = tx.Enqueue(r.Lineage, []byte(ev.Run.RunID), b)
	return err
}

// RefitStart writes, in tx, the START of refit run.
func (r *Recorder) RefitStart(tx Tx, run Refit) error {
	ev, err := r.Producer.RefitStart(run, tx.Time())
	return r.enqueue(tx, ev, err)
}

// RefitFail writes, in tx, the FAIL of refit run, which failed with cause.
func (r *Recorder) RefitFail(tx Tx, run Refit, cause error) error {
	ev, err := r.Producer.RefitFail(run, cause.Error(), tx.Time())
	return r.enqueue(tx, ev, err)
}

// RefitComplete writes, in the refit's transaction tx, the COMPLETE of run with out
// (Models is set here), and the COMPLETE of every erasure it audited (the last record
// of each: audited[i], audited by audits[i]), with the model serving after it
// (version, modelID).
func (r *Recorder) RefitComplete(tx Tx, run Refit, out Outcome, audited []*ingest.Deletion, audits []stream.Audit, version uint64, modelID string) error {
	out.Models = r.Models
	ev, err := r.Producer.RefitComplete(run, out, tx.Time())
	if err := r.enqueue(tx, ev, err); err != nil {
		return err
	}
	for i, rec := range audited {
		if err := r.ErasureComplete(tx, rec, audits[i], version, modelID); err != nil {
			return err
		}
	}
	return nil
}

// ErasureRun is the erasure run of an erasure record, and whether rec is one (its
// source, the request's coordinates topic/partition/offset, names the erasures topic
// and the request's offset).
func (r *Recorder) ErasureRun(rec *ingest.Deletion) (Erasure, bool) {
	if rec.Kind != ingest.KindErasure {
		return Erasure{}, false
	}
	e := Erasure{Job: r.JobOf("erasure"), Request: rec.Request, SubjectHash: rec.Subject}
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
		e.Erasures.Offsets = []Offsets{{Partition: part, First: off, Last: off}}
	}
	return e, true
}

// ErasureStart writes, in tx, the START of the erasure of rec (nothing for another
// kind of record, or a part of a request after its first).
func (r *Recorder) ErasureStart(tx Tx, rec *ingest.Deletion) error {
	e, ok := r.ErasureRun(rec)
	if !ok || rec.Part > 1 {
		return nil
	}
	ev, err := r.Producer.ErasureStart(e, tx.Time())
	return r.enqueue(tx, ev, err)
}

// ErasureComplete writes, in tx, the COMPLETE of the erasure of rec, audited by a (the
// last part of a request with several; nothing for another kind of record), with the
// model serving after it.
func (r *Recorder) ErasureComplete(tx Tx, rec *ingest.Deletion, a stream.Audit, version uint64, modelID string) error {
	e, ok := r.ErasureRun(rec)
	if !ok || rec.Part < rec.Parts {
		return nil
	}
	points := len(rec.Points) + max(rec.Parts-1, 0)*ingest.MaxErasurePoints
	out := Outcome{Models: r.Models, Version: version, ModelID: modelID, Points: &points,
		Audits: r.Audits, AuditSeq: a.Seq, AuditHash: a.Hash}
	ev, err := r.Producer.ErasureComplete(e, out, tx.Time())
	return r.enqueue(tx, ev, err)
}

// Plan notes that the training batch being applied plans rec (the ingest's Describe
// hook): an erasure's first record, whose START the batch's commit writes.
func (r *Recorder) Plan(rec *ingest.Deletion) {
	if rec.Kind != ingest.KindErasure || rec.Part > 1 {
		return
	}
	if r.planned == nil {
		r.planned = map[string]*plannedErasure{}
	}
	r.planned[rec.Source] = &plannedErasure{rec: rec}
}

// CommitPlanned forgets the batch's planned erasures and, when write is set (the
// daemon leads), writes in tx the START of each whose START its audit did not write
// already (AuditedAtOnce), in the order of their sources. A batch that is planned
// again (a retried transaction) notes its erasures again.
func (r *Recorder) CommitPlanned(tx Tx, write bool) error {
	planned := r.planned
	r.planned = nil
	if !write {
		return nil
	}
	for _, src := range slices.Sorted(maps.Keys(planned)) {
		if p := planned[src]; !p.started {
			if err := r.ErasureStart(tx, p.rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// AuditedAtOnce writes, in tx, the START of the erasure of rec, which its request's own
// transaction audits (it erased nothing), before the audit; complete writes its
// COMPLETE after, with the model serving then (serving, which may report none).
func (r *Recorder) AuditedAtOnce(tx Tx, rec *ingest.Deletion, serving func() (uint64, string)) (complete func(a stream.Audit) error, err error) {
	if rec.Kind != ingest.KindErasure {
		return func(stream.Audit) error { return nil }, nil
	}
	if p := r.planned[rec.Source]; p != nil {
		p.started = true
	}
	if err := r.ErasureStart(tx, rec); err != nil {
		return nil, err
	}
	return func(a stream.Audit) error {
		version, id := serving()
		return r.ErasureComplete(tx, rec, a, version, id)
	}, nil
}
