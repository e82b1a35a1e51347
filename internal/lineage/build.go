package lineage

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Producer builds the events of one deployment.
type Producer struct {
	// URI is every event's producer and every facet's _producer: the cairn build, for
	// example "https://github.com/cairnhq/cairn/tree/v1.2.0". An absolute URI.
	URI string
	// Kafka is the dataset namespace of cairn's topics, in OpenLineage's naming for
	// Kafka "kafka://{bootstrap host}:{port}". An absolute URI.
	Kafka string
}

// Topic is a topic a run read and the offsets it applied per partition.
type Topic struct {
	Name    string
	Offsets []Offsets
}

// Refit is one refit as known when it starts. Every event of the run is built from the
// same Refit, which is what makes their run ids equal.
type Refit struct {
	Job Job
	// Train is the training topic and the offsets the refit's snapshot applied.
	Train Topic
	// Previous is the model version serving when the refit started (0: none).
	Previous uint64
}

// Erasure is one erasure request as known when it starts.
type Erasure struct {
	Job     Job
	Request string
	// SubjectHash is the keyed hash of the data subject (hex HMAC-SHA256, 64 digits);
	// the subject itself never enters an event.
	SubjectHash string
	// Erasures is the erasures topic and the request's offset.
	Erasures Topic
}

// Outcome is what a completed run left.
type Outcome struct {
	// Models is the models topic; with Version > 0 it is an output dataset at that
	// version (facet "version"), and the run facet cairn_model names Version and
	// ModelID.
	Models  string
	Version uint64
	ModelID string
	// Residual is the pool's certificate per view (views "A" and "B"); nil: no
	// cairn_certificate facet.
	Residual []ViewResidual
	// Coverage is the share of the backbone's parameters the kernel covers, in [0, 1];
	// nil: no cairn_coverage facet.
	Coverage *float64
	// Audits is the audits topic the run wrote to, an output dataset ("" none);
	// AuditSeq and AuditHash the chain's head after the run (AuditSeq 0: no
	// cairn_auditChain facet).
	Audits    string
	AuditSeq  uint64
	AuditHash string
	// Points is how many points an erasure removed (nil: not stated).
	Points *int
}

// RunID is the run id of r: the UUID version 5, in Namespace, of the job's namespace
// and name, the training topic, its applied offsets (sorted by partition) and the
// previous model version. A replay of the same inputs reproduces it; a refit of other
// offsets, or after another model, gets another.
func (r Refit) RunID() string {
	n := runName{}.str("refit").str(r.Job.Namespace).str(r.Job.Name)
	return runID(n.topic(r.Train).num(r.Previous))
}

// RunID is the run id of e: the UUID version 5, in Namespace, of the job's namespace
// and name, the request, the subject's hash and the erasures topic with the request's
// offsets.
func (e Erasure) RunID() string {
	n := runName{}.str("erasure").str(e.Job.Namespace).str(e.Job.Name).str(e.Request).str(e.SubjectHash)
	return runID(n.topic(e.Erasures))
}

func (n runName) topic(t Topic) runName {
	n = n.str(t.Name).num(uint64(len(t.Offsets)))
	for _, o := range sortedOffsets(t.Offsets) {
		n = n.num(uint64(o.Partition)).num(uint64(o.First)).num(uint64(o.Last))
	}
	return n
}

func sortedOffsets(os []Offsets) []Offsets {
	s := slices.Clone(os)
	slices.SortFunc(s, func(a, b Offsets) int { return cmp.Compare(a.Partition, b.Partition) })
	return s
}

// RefitStart is the START event of refit r at time at.
func (p Producer) RefitStart(r Refit, at time.Time) (RunEvent, error) {
	return p.refit(Start, r, at, nil, "")
}

// RefitComplete is the COMPLETE event of refit r, which left out, at time at.
func (p Producer) RefitComplete(r Refit, out Outcome, at time.Time) (RunEvent, error) {
	return p.refit(Complete, r, at, &out, "")
}

// RefitFail is the FAIL event of refit r, which failed with reason (an error's text),
// at time at.
func (p Producer) RefitFail(r Refit, reason string, at time.Time) (RunEvent, error) {
	return p.refit(Fail, r, at, nil, reason)
}

// ErasureStart is the START event of erasure e at time at.
func (p Producer) ErasureStart(e Erasure, at time.Time) (RunEvent, error) {
	return p.erasure(Start, e, at, nil, "")
}

// ErasureComplete is the COMPLETE event of erasure e, which left out, at time at.
func (p Producer) ErasureComplete(e Erasure, out Outcome, at time.Time) (RunEvent, error) {
	return p.erasure(Complete, e, at, &out, "")
}

// ErasureFail is the FAIL event of erasure e, which failed with reason, at time at.
func (p Producer) ErasureFail(e Erasure, reason string, at time.Time) (RunEvent, error) {
	return p.erasure(Fail, e, at, nil, reason)
}

func (p Producer) refit(t EventType, r Refit, at time.Time, out *Outcome, reason string) (RunEvent, error) {
	errs := p.check(r.Job, at, out, t, reason)
	errs = checkTopic(errs, "refit.train", r.Train)
	if err := errors.Join(errs...); err != nil {
		return RunEvent{}, err
	}
	e := p.event(t, r.Job, r.RunID(), at)
	e.Inputs = []InputDataset{p.input(r.Train)}
	p.finish(&e, out, reason)
	return e, nil
}

func (p Producer) erasure(t EventType, x Erasure, at time.Time, out *Outcome, reason string) (RunEvent, error) {
	errs := p.check(x.Job, at, out, t, reason)
	errs = checkTopic(errs, "erasure.erasures", x.Erasures)
	if x.Request == "" {
		errs = append(errs, fmt.Errorf("%w: erasure.request: empty", ErrInvalid))
	}
	if !isHex64(x.SubjectHash) {
		errs = append(errs, fmt.Errorf("%w: erasure.subject_hash: want 64 lower-case hex digits (never the subject)", ErrInvalid))
	}
	if err := errors.Join(errs...); err != nil {
		return RunEvent{}, err
	}
	e := p.event(t, x.Job, x.RunID(), at)
	e.Inputs = []InputDataset{p.input(x.Erasures)}
	f := ErasureFacet{BaseFacet: p.base(FacetSchemaURL("ErasureRunFacet")), Request: x.Request, SubjectHash: x.SubjectHash}
	if out != nil {
		f.Points = out.Points
	}
	e.Run.Facets = map[string]any{"cairn_erasure": f}
	p.finish(&e, out, reason)
	return e, nil
}

func (p Producer) event(t EventType, job Job, runID string, at time.Time) RunEvent {
	return RunEvent{EventType: t, EventTime: at.UTC().Format(time.RFC3339Nano), Run: Run{RunID: runID}, Job: job,
		Inputs: []InputDataset{}, Outputs: []OutputDataset{}, Producer: p.URI, SchemaURL: RunEventSchemaURL}
}

func (p Producer) base(schemaURL string) BaseFacet {
	return BaseFacet{Producer: p.URI, SchemaURL: schemaURL}
}

func (p Producer) input(t Topic) InputDataset {
	f := OffsetsFacet{BaseFacet: p.base(FacetSchemaURL("OffsetsInputDatasetFacet")), Partitions: sortedOffsets(t.Offsets)}
	if f.Partitions == nil {
		f.Partitions = []Offsets{}
	}
	return InputDataset{Namespace: p.Kafka, Name: t.Name, InputFacets: map[string]any{"cairn_offsets": f}}
}

// finish adds a COMPLETE event's outputs and run facets, or a FAIL event's error.
func (p Producer) finish(e *RunEvent, out *Outcome, reason string) {
	set := func(k string, v any) {
		if e.Run.Facets == nil {
			e.Run.Facets = map[string]any{}
		}
		e.Run.Facets[k] = v
	}
	if e.EventType == Fail {
		set("errorMessage", ErrorMessageFacet{BaseFacet: p.base(ErrorMessageSchemaURL), Message: reason, ProgrammingLanguage: "Go"})
	}
	if out == nil {
		return
	}
	if out.Version > 0 {
		v := DatasetVersionFacet{BaseFacet: p.base(DatasetVersionSchemaURL), DatasetVersion: strconv.FormatUint(out.Version, 10)}
		e.Outputs = append(e.Outputs, OutputDataset{Namespace: p.Kafka, Name: out.Models, Facets: map[string]any{"version": v}})
		set("cairn_model", ModelFacet{BaseFacet: p.base(FacetSchemaURL("ModelRunFacet")), Version: out.Version, ID: out.ModelID})
	}
	if out.Audits != "" {
		e.Outputs = append(e.Outputs, OutputDataset{Namespace: p.Kafka, Name: out.Audits})
	}
	if out.Residual != nil {
		set("cairn_certificate", CertificateFacet{BaseFacet: p.base(FacetSchemaURL("CertificateRunFacet")), Views: slices.Clone(out.Residual)})
	}
	if out.Coverage != nil {
		set("cairn_coverage", CoverageFacet{BaseFacet: p.base(FacetSchemaURL("CoverageRunFacet")), ParameterShare: *out.Coverage})
	}
	if out.AuditSeq > 0 {
		set("cairn_auditChain", AuditChainFacet{BaseFacet: p.base(FacetSchemaURL("AuditChainRunFacet")), Seq: out.AuditSeq, Hash: out.AuditHash})
	}
}

// check reports every problem of the parts all runs share.
func (p Producer) check(job Job, at time.Time, out *Outcome, t EventType, reason string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	for _, f := range [][2]string{{"producer.uri", p.URI}, {"producer.kafka", p.Kafka}} {
		if v, err := url.Parse(f[1]); err != nil || !v.IsAbs() {
			bad(f[0], "%q is not an absolute URI", f[1])
		}
	}
	if job.Namespace == "" || job.Name == "" {
		bad("job", "namespace %q and name %q must both be set", job.Namespace, job.Name)
	}
	if at.IsZero() {
		bad("time", "zero")
	}
	if t == Fail && reason == "" {
		bad("reason", "empty; a FAIL event says why")
	}
	if out != nil {
		errs = append(errs, out.check()...)
	}
	return errs
}

func (o *Outcome) check() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: outcome.%s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if o.Version > 0 && o.Models == "" {
		bad("models", "empty with version %d", o.Version)
	}
	for i, v := range o.Residual {
		if v.View != "A" && v.View != "B" {
			bad(fmt.Sprintf("residual[%d].view", i), "%q: want A or B", v.View)
		}
		if !(v.TraceR >= 0 && v.TraceK >= 0) || math.IsInf(v.TraceR, 0) || math.IsInf(v.TraceK, 0) {
			bad(fmt.Sprintf("residual[%d]", i), "tr R %v, tr K %v: want finite and non-negative", v.TraceR, v.TraceK)
		}
	}
	if c := o.Coverage; c != nil && !(*c >= 0 && *c <= 1) {
		bad("coverage", "%v: want a share in [0, 1]", *c)
	}
	if o.AuditSeq > 0 && !isHex64(o.AuditHash) {
		bad("audit_hash", "%q: want 64 lower-case hex digits", o.AuditHash)
	}
	if o.Points != nil && *o.Points < 0 {
		bad("points", "%d: negative", *o.Points)
	}
	return errs
}

func checkTopic(errs []error, field string, t Topic) []error {
	if t.Name == "" {
		errs = append(errs, fmt.Errorf("%w: %s.name: empty", ErrInvalid, field))
	}
	seen := map[int]bool{}
	for _, o := range t.Offsets {
		if o.Partition < 0 || seen[o.Partition] || o.First < 0 || o.First > o.Last {
			errs = append(errs, fmt.Errorf("%w: %s.offsets: partition %d, %d to %d: want each partition once, 0 <= first <= last",
				ErrInvalid, field, o.Partition, o.First, o.Last))
		}
		seen[o.Partition] = true
	}
	return errs
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
