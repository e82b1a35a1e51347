package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The output events below are plain structs that the daemon fills; stream
// only checks that the keys docs/events.md requires are present
// and that every number is finite, then writes JSON with "v":1. Extra, when
// set, must be a JSON object and carries daemon-specific detail under
// "extra" without a schema change here.

// Verdicts of an attribution (docs/architecture.md, "Certificates and verdicts").
const (
	VerdictCertified   = "certified"
	VerdictUncertified = "uncertified"
	VerdictFitLimited  = "fit_limited"
	// VerdictUnstable: the intervals separate, but the answer is not expected to survive
	// a refit with another seed (Stable is false).
	VerdictUnstable = "unstable"
)

// Scored is one landmark of a top-K answer: its id, score Î and radius ε.
type Scored struct {
	ID     string  `json:"id"`
	Score  float64 `json:"score"`
	Radius float64 `json:"radius"`
	// View is the augmented view ("A" or "B") whose landmark term this is: a point can be
	// a landmark of both views, and each term is ranked on its own.
	View string `json:"view,omitempty"`
	// Cosine is the exact similarity with both norms divided out, in [−1, 1], on answers
	// computed on exact rows (0 and left out otherwise): a landmark that tops the
	// ranking by its size, not by its likeness to the query, shows a low cosine.
	Cosine float64 `json:"cosine,omitempty"`
}

// Budget is the sketch and pool budget (h, s, m, M) of an answer.
type Budget struct {
	Heads     int `json:"h"`
	SketchDim int `json:"s"`
	PerView   int `json:"m"`
	Pool      int `json:"M"`
}

// Attribution is the body of a cairn.attributions event, keyed by Request.
type Attribution struct {
	Request string   `json:"request"`
	Model   uint64   `json:"model"` // model version the answer was computed on
	Verdict string   `json:"verdict"`
	TopK    []Scored `json:"topk"`
	// Separation: min(Î−ε) over the top-K and max(Î+ε) below the cut.
	Lower   float64            `json:"lower"`
	Upper   float64            `json:"upper"`
	Budget  Budget             `json:"budget"`
	Delta   float64            `json:"delta"`
	DeltaBy map[string]float64 `json:"delta_allocation,omitempty"`
	// VarianceModel names what the radii bound: "exact_kernel" (exact eNTK rows, rounding
	// bound only, δ not spent) or "conservative" (the sketched evaluation draw).
	VarianceModel string `json:"variance_model"`
	// ExactRows says where an exact answer's landmark rows were read from: "memory", or
	// "disk" when they exceed query.exact_memory_bytes and fit query.exact_disk_bytes
	// (a mapped file; the same numbers bit for bit). Empty on sketched answers.
	ExactRows string `json:"exact_rows,omitempty"`
	// Seed is the evaluation draw's seed once revealed, else 0; SeedHash commits to it
	// (hex SHA-256 of its 8 big-endian bytes) in every sketched answer, and the seed is
	// published on the status topic when the draw is retired. Both empty for exact answers.
	Seed     uint64  `json:"seed"`
	SeedHash string  `json:"seed_hash,omitempty"`
	Residual float64 `json:"residual"` // pool residual certificate tr R
	// Score names the ranking of TopK (certify.Rankings: gradient_cosine, gradient,
	// entk, displacement or representer). Stable says
	// whether the top-K is expected to survive a refit with another seed (Stability, the
	// expected top-K Jaccard, at least query.stable_jaccard; null when not known); only a
	// stable answer is certified (an unstable one that separates says "unstable").
	Score     string   `json:"score"`
	Stable    bool     `json:"stable"`
	Stability *float64 `json:"stability"`
	// ResidualFraction is how much of the query the landmarks leave unexplained: its
	// residual against the served landmarks as a fraction of k(x_t, x_t), in [0, 1]
	// (0: the query lies in their span; 1: orthogonal to every landmark).
	ResidualFraction *float64 `json:"residual_fraction,omitempty"`
	// Coverage is the share of the backbone's parameters the kernel differentiates: all
	// of a built-in backbone's, those model.params selects of an ONNX model's.
	Coverage *Coverage       `json:"coverage,omitempty"`
	Extra    json.RawMessage `json:"extra,omitempty"`
}

// Coverage is how much of the backbone the eNTK of an answer is over: the parameters in
// the kernel, the model's parameters, and their ratio (1 for every parameter).
type Coverage struct {
	ParamsInKernel int     `json:"params_in_kernel"`
	ParamsTotal    int     `json:"params_total"`
	Share          float64 `json:"share"`
}

// Audit is the body of a cairn.audits event, keyed by Request. Seq,
// PrevHash and Hash form the hash chain that storage maintains; stream
// only carries them.
type Audit struct {
	Request string `json:"request"`
	ID      string `json:"id"`
	// Known is false for a delete of an id that was not stored (nothing was removed;
	// the audit attests that).
	Known       bool    `json:"known"`
	WasLandmark bool    `json:"was_landmark"`
	ModelBefore uint64  `json:"model_before"`
	ModelAfter  uint64  `json:"model_after"`
	Percentile  float64 `json:"percentile"`
	PValue      float64 `json:"p_value"`
	Seq         uint64  `json:"seq"`
	PrevHash    string  `json:"prev_hash"`
	Hash        string  `json:"hash"`
	// Body is the canonical audit record (a JSON object, serialized) that the hash chain
	// covers: Hash = hex(SHA-256(PrevHash bytes || Body bytes)), PrevHash of seq 1 being
	// 32 zero bytes. The other fields repeat what Body holds, for convenience; a verifier
	// trusts Body only.
	Body string `json:"body"`
	// KeyID names the daemon's audit key and Sig is its Ed25519 signature (hex) of seq,
	// prev_hash and hash (package internal/auditsig), so that a record appended by
	// anybody else is told apart. Empty only in audits of an unsigned build.
	KeyID string `json:"key_id,omitempty"`
	Sig   string `json:"sig,omitempty"`
	// SubjectHash and Points are set in the audit of a data subject's request (an
	// ErasureEvent): the subject as its keyed hash (hex HMAC-SHA256, never the subject
	// itself), and for an erasure every point it erased; ID is then the subject hash too.
	SubjectHash string          `json:"subject_hash,omitempty"`
	Points      []AuditPoint    `json:"points,omitempty"`
	Extra       json.RawMessage `json:"extra,omitempty"`
}

// AuditPoint is one point an erasure audit lists: its id and whether it was a landmark of
// the serving model it was erased from. The audit's Body adds where its tombstone landed.
type AuditPoint struct {
	ID          string `json:"id"`
	WasLandmark bool   `json:"was_landmark"`
}

// Status is the body of a cairn.status event, keyed by Kind. The daemon writes the kinds
// "model", "drift", "certificate", "eval_draw", "audit_key" and "audit_checkpoint"
// (docs/events.md "cairn.status").
type Status struct {
	Kind string          `json:"kind"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// DeadLetter is the body of a cairn.dlq event: a rejected input's reason, its
// coordinates, its length and SHA-256, and, only where the daemon is configured to keep
// them (kafka.dlq_keep_raw), its first bytes: a rejected upsert is still somebody's data,
// and the dead-letter topic is not reached by deletions.
type DeadLetter struct {
	Reason    Reason `json:"reason"`
	Message   string `json:"message"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key"` // base64 in JSON, at most MaxDeadLetterRaw bytes
	Raw       []byte `json:"raw"` // base64 in JSON, the first MaxDeadLetterRaw bytes
	RawLen    int    `json:"raw_len"`
	Truncated bool   `json:"truncated"`
	// SHA256 is the hex SHA-256 of the whole value, so that a producer can match its
	// message without the raw bytes.
	SHA256 string `json:"sha256"`
}

// MaxDeadLetterRaw bounds the raw bytes copied into a dead-letter event, so
// that an oversize input cannot produce an oversize output.
const MaxDeadLetterRaw = 4 << 10

// NewDeadLetter describes the rejected message src. err is normally a
// *RejectError; any other error is recorded with reason "bad_json" only if
// it is one, else with its text and reason "internal".
func NewDeadLetter(src Message, err error) DeadLetter {
	reason := ReasonOf(err)
	if reason == "" {
		reason = "internal"
	}
	msg := ""
	if err != nil {
		msg = truncate(err.Error(), 1024)
	}
	raw := src.Value
	trunc := len(raw) > MaxDeadLetterRaw
	if trunc {
		raw = raw[:MaxDeadLetterRaw]
	}
	key := src.Key
	if len(key) > MaxDeadLetterRaw {
		key = key[:MaxDeadLetterRaw]
	}
	sum := sha256.Sum256(src.Value)
	return DeadLetter{
		Reason:    reason,
		Message:   msg,
		Topic:     src.Topic,
		Partition: src.Partition,
		Offset:    src.Offset,
		Key:       append([]byte(nil), key...),
		Raw:       append([]byte(nil), raw...),
		RawLen:    len(src.Value),
		Truncated: trunc,
		SHA256:    hex.EncodeToString(sum[:]),
	}
}

// WithoutRaw is d without the raw bytes (Raw nil, Truncated false): the default form
// of a dead letter, which keeps the reason, the coordinates, the key, the length and the
// SHA-256.
func (d DeadLetter) WithoutRaw() DeadLetter {
	d.Raw, d.Truncated = nil, false
	return d
}

// DeadLetterKey is the key of a dead-letter event: the source coordinates,
// "topic/partition/offset", so a re-sent dead letter has the same key.
func DeadLetterKey(topic string, partition int, offset int64) []byte {
	b := make([]byte, 0, len(topic)+24)
	b = append(b, topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, offset, 10)
}

// Encode writes the attribution as JSON with "v":1 after checking it.
func (a Attribution) Encode() ([]byte, error) {
	var errs []error
	if a.Request == "" {
		errs = append(errs, fmt.Errorf("attribution.request: empty"))
	}
	switch a.Verdict {
	case VerdictCertified, VerdictUncertified, VerdictFitLimited, VerdictUnstable:
	default:
		errs = append(errs, fmt.Errorf("attribution.verdict %q: want %s, %s, %s or %s", a.Verdict, VerdictCertified, VerdictUncertified, VerdictFitLimited, VerdictUnstable))
	}
	for i, s := range a.TopK {
		if s.ID == "" {
			errs = append(errs, fmt.Errorf("attribution.topk[%d].id: empty", i))
		}
		errs = appendFinite(errs, fmt.Sprintf("attribution.topk[%d].score", i), s.Score)
		errs = appendFinite(errs, fmt.Sprintf("attribution.topk[%d].radius", i), s.Radius)
	}
	errs = appendFinite(errs, "attribution.lower", a.Lower)
	errs = appendFinite(errs, "attribution.upper", a.Upper)
	errs = appendFinite(errs, "attribution.delta", a.Delta)
	errs = appendFinite(errs, "attribution.residual", a.Residual)
	for k, v := range a.DeltaBy {
		errs = appendFinite(errs, "attribution.delta_allocation."+k, v)
	}
	if c := a.Coverage; c != nil && !(c.ParamsInKernel >= 0 && c.ParamsInKernel <= c.ParamsTotal && c.Share >= 0 && c.Share <= 1) {
		errs = append(errs, fmt.Errorf("attribution.coverage %+v: want 0 <= params_in_kernel <= params_total and share in [0, 1]", *c))
	}
	errs = appendExtra(errs, "attribution.extra", a.Extra)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("stream: encode attribution: %w", err)
	}
	if a.TopK == nil {
		a.TopK = []Scored{} // "topk" is required: write [] rather than null
	}
	return marshalV(a)
}

// Encode writes the audit as JSON with "v":1 after checking it.
func (a Audit) Encode() ([]byte, error) {
	var errs []error
	if a.Request == "" {
		errs = append(errs, errors.New("audit.request: empty"))
	}
	if a.ID == "" {
		errs = append(errs, errors.New("audit.id: empty"))
	}
	if a.Hash == "" {
		errs = append(errs, errors.New("audit.hash: empty"))
	}
	errs = appendFinite(errs, "audit.percentile", a.Percentile)
	errs = appendFinite(errs, "audit.p_value", a.PValue)
	errs = appendExtra(errs, "audit.extra", a.Extra)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("stream: encode audit: %w", err)
	}
	return marshalV(a)
}

// Encode writes the status as JSON with "v":1 after checking it.
func (s Status) Encode() ([]byte, error) {
	if s.Kind == "" {
		return nil, errors.New("stream: encode status: kind: empty")
	}
	if len(s.Data) == 0 {
		s.Data = json.RawMessage("{}")
	} else if !json.Valid(s.Data) {
		return nil, fmt.Errorf("stream: encode status %q: data is not valid JSON", s.Kind)
	}
	return marshalV(s)
}

// Encode writes the dead letter as JSON with "v":1.
func (d DeadLetter) Encode() ([]byte, error) { return marshalV(d) }

// marshalV writes v as a JSON object with "v":1 as its first key.
func marshalV(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("stream: encode %T: %w", v, err)
	}
	out := make([]byte, 0, len(body)+8)
	out = append(out, `{"v":1`...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

func appendFinite(errs []error, field string, v float64) []error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		errs = append(errs, fmt.Errorf("%s: %v is not finite", field, v))
	}
	return errs
}

func appendExtra(errs []error, field string, raw json.RawMessage) []error {
	if len(raw) == 0 {
		return errs
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		errs = append(errs, fmt.Errorf("%s: want a JSON object", field))
	}
	return errs
}
