package query

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

// Limits are the bounds a query message is decoded under (stream.DecodeQuery) for
// cfg and inputs of inputDim values: the training limits, and as a query's "score"
// exactly the rankings answers know (certify.Rankings).
func Limits(cfg config.Config, inputDim int) (stream.Limits, error) {
	lim, err := ingest.TrainLimits(cfg, inputDim)
	if err != nil {
		return stream.Limits{}, err
	}
	for _, r := range certify.Rankings {
		lim.Scores = append(lim.Scores, string(r))
	}
	return lim, nil
}

// Config is what an Answerer needs.
type Config struct {
	// Daemon is the configuration: query (k, δ, score, draw_queries), the attribution
	// and dead-letter topics, kafka.dlq_keep_raw, pool.m.
	Daemon  config.Config
	Limits  stream.Limits // see Limits
	Log     zerolog.Logger
	Metrics *metrics.Set
	UI      *ui.Recorder // every answer accounted is recorded here
	// Points returns the stored points a query by id asks about (nil on a replica,
	// which stores none and answers by the ids of its gradient points).
	Points func() *ingest.Points
	// Residuals returns the pool's residual certificates per view, which every answer
	// reports (ok false: none, as on a replica).
	Residuals func() (r [2]coreset.ResidualCertificate, ok bool)
	// Coverage is the served backbone's parameter coverage, which every answer states
	// (nil: none stated).
	Coverage *stream.Coverage
}

// Answerer answers queries on a serving model. It is safe for concurrent use; a
// Workspace passed to Batch belongs to the caller.
type Answerer struct {
	cfg   Config
	count atomic.Uint64
	work  sync.Pool // *serving.Workspace for Answer
}

// New returns an Answerer under c.
func New(c Config) *Answerer { return &Answerer{cfg: c} }

// Count is the number of answers accounted (Account) since New; Answer does not count.
func (a *Answerer) Count() uint64 { return a.count.Load() }

// Out is the outcome of one query message: an attribution, a dead letter, or nothing
// (Skip: a re-delivery of an answered offset, or an answer that does not encode).
type Out struct {
	Msg        stream.Message
	Skip       bool
	Topic      string // where Key and Value go: the attribution or the dead-letter topic
	Key, Value []byte
	verdict    string // set for an attribution
	secs       float64
	ui         ui.Answer // what /ui/answer shows, recorded once the answer is committed
}

// Batch decodes and answers one batch of query messages on s: every valid query is
// certified in one s.AnswerBatch (the exact rows read once for the batch), every
// invalid one and every failure becomes a dead letter, and the messages answered (if
// set) reports as answered already are skipped. s is nil only before a model can
// exist (refit.min_points): every query is then a dead letter. Nothing is counted
// until Account.
func (a *Answerer) Batch(w *serving.Workspace, s *serving.Model, batch []stream.Message, answered func(stream.Message) bool) []Out {
	t0 := time.Now()
	outs := make([]Out, len(batch))
	var (
		idx    []int
		evs    []stream.QueryEvent
		xs     [][]float64
		ks     []int
		deltas []float64
		ranks  []certify.Ranking
	)
	for i, m := range batch {
		outs[i].Msg = m
		if answered != nil && answered(m) {
			outs[i].Skip = true
			continue
		}
		ev, err := stream.DecodeQueryMessage(m, a.cfg.Limits) // CloudEvents headers checked, ce_id the default request
		var x []float64
		if err == nil {
			x, err = a.input(s, ev)
		}
		if err != nil {
			a.deadLetter(&outs[i], err)
			continue
		}
		k, delta := a.kDelta(ev)
		idx, evs, xs, ks, deltas = append(idx, i), append(evs, ev), append(xs, x), append(ks, k), append(deltas, delta)
		ranks = append(ranks, a.ranking(ev, s))
	}
	if len(idx) == 0 {
		return outs
	}
	certs, errs := make([]certify.Certificate, len(idx)), make([]error, len(idx))
	s.AnswerBatch(w, certs, errs, xs, ks, deltas, ranks)
	secs := time.Since(t0).Seconds()
	for j, i := range idx {
		o := &outs[i]
		if errs[j] != nil {
			a.deadLetter(o, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "model", Msg: errs[j].Error()})
			continue
		}
		at, ex, err := a.attribution(s, evs[j], deltas[j], &certs[j])
		var v []byte
		if err == nil {
			v, err = at.Encode()
		}
		if err != nil {
			a.cfg.Log.Error().Err(err).Str("request", evs[j].Request).Msg("attribution does not encode")
			o.Skip = true
			continue
		}
		o.Topic, o.Key, o.Value, o.verdict, o.secs = a.cfg.Daemon.Kafka.Topics.Attributions, []byte(evs[j].Request), v, at.Verdict, secs
		o.ui = uiAnswer(at, ex, evs[j], secs)
	}
	return outs
}

// Account counts the outcomes of a batch answered on s once they are committed (or
// written): answers in the count, the metrics, s's evaluation draw and the UI's
// recent answers, dead letters in the metrics.
func (a *Answerer) Account(outs []Out, s *serving.Model) {
	m := a.cfg.Metrics
	for _, o := range outs {
		switch {
		case o.Skip:
		case o.verdict != "":
			a.count.Add(1)
			s.CountDraw() // an answer implies s != nil
			m.ObserveQuery(o.secs, o.verdict)
			m.AddEvents(o.Msg.Topic, "applied", 1)
			a.cfg.UI.Answered(o.ui)
		default:
			m.AddEvents(o.Msg.Topic, "dead_letter", 1)
		}
	}
}

// Answer computes the certified attribution of one query on s, in process (no Kafka,
// nothing stored). It returns serving.ErrNoModel when s is nil. It counts against the
// evaluation draw's query budget like any answer.
func (a *Answerer) Answer(s *serving.Model, q stream.QueryEvent) (stream.Attribution, error) {
	if s == nil {
		return stream.Attribution{}, serving.ErrNoModel
	}
	w, _ := a.work.Get().(*serving.Workspace)
	if w == nil {
		w = new(serving.Workspace)
	}
	defer a.work.Put(w)
	x, err := a.input(s, q)
	if err != nil {
		return stream.Attribution{}, err
	}
	k, delta := a.kDelta(q)
	c, err := s.AnswerRanked(w, x, k, delta, a.ranking(q, s))
	if err != nil {
		return stream.Attribution{}, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "model", Msg: err.Error()}
	}
	at, _, err := a.attribution(s, q, delta, &c)
	if err == nil {
		s.CountDraw()
	}
	return at, err
}

// deadLetter makes o the dead letter of its message for err.
func (a *Answerer) deadLetter(o *Out, err error) {
	m, cfg := o.Msg, a.cfg.Daemon
	dm, derr := stream.DeadLetterMessage(cfg.Kafka.Topics.DLQ, m, err, cfg.Kafka.DLQKeepRaw)
	if derr != nil { // the dead letter itself does not encode: a bug
		a.cfg.Log.Error().Err(derr).Msg("dead letter for a query")
		o.Skip = true
		return
	}
	a.cfg.Metrics.AddReject(string(stream.ReasonOf(err)), 1)
	a.cfg.Log.Warn().Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
		Str("reason", string(stream.ReasonOf(err))).Err(err).Msg("dead-lettered a query")
	o.Topic, o.Key, o.Value = dm.Topic, dm.Key, dm.Value
}

// input is the input a query asks about: its x, or the stored point's raw input for a
// query by id; an error when there is no such point or no model.
func (a *Answerer) input(s *serving.Model, ev stream.QueryEvent) ([]float64, error) {
	x := ev.X
	if ev.ID != "" {
		var cache *ingest.Points
		if a.cfg.Points != nil {
			cache = a.cfg.Points()
		}
		if cache == nil { // a replica: the labelled points whose gradient rows it serves
			if s != nil {
				if x, ok := s.GradInput(ev.ID); ok {
					return x, nil
				}
			}
			return nil, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "id",
				Msg: fmt.Sprintf("a replica holds the labelled stored points with gradient rows only, and not %q: ask by input, or let the primary answer queries by id (query.on_primary)", ev.ID)}
		}
		e := cache.Get(ev.ID)
		if e == nil {
			return nil, &stream.RejectError{Reason: stream.ReasonUnknownID, Field: "id",
				Msg: fmt.Sprintf("no stored point %q", ev.ID)}
		}
		x = e.X
	}
	if s == nil {
		return nil, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "model",
			Msg: "no model: fewer stored points than refit.min_points"}
	}
	return x, nil
}

// kDelta are the k and δ a query asks for, else query.k and query.delta.
func (a *Answerer) kDelta(ev stream.QueryEvent) (int, float64) {
	k, delta := ev.K, ev.Delta
	if k == 0 {
		k = a.cfg.Daemon.Query.K
	}
	if delta == 0 {
		delta = a.cfg.Daemon.Query.Delta
	}
	return k, delta
}

// ranking is the ranking a query asks for: its "score", else query.score (both
// validated: the decoder's names are certify's, and config.Validate checks the default).
// A default of the gradient ranking falls back to entk on a model without gradient
// rows (no labelled points, or over query.gradient_memory_bytes; a replica builds the
// primary's rows from the point records of the models topic); the answer's "score" says
// which ranked it. A query that names the gradient ranking gets no fallback:
// on such a model it is a dead letter that says why.
func (a *Answerer) ranking(ev stream.QueryEvent, s *serving.Model) certify.Ranking {
	if ev.Score != "" {
		return certify.Ranking(ev.Score)
	}
	r := certify.Ranking(a.cfg.Daemon.Query.Score)
	if r.AllPoints() && (s == nil || s.Grad == nil) {
		return certify.Similarity
	}
	return r
}

// extra is the "extra" object of an attribution event: the rest of the certificate,
// so a user can recompute the answer.
type extra struct {
	ModelID        string              `json:"model_id"`
	Separation     float64             `json:"separation"`
	K              int                 `json:"k"`
	RunnerUp       stream.Scored       `json:"runner_up"`
	VarianceModel  string              `json:"variance_model"`
	EvalDraw       string              `json:"eval_draw"`
	PaddedP        int                 `json:"padded_p"`
	FitFloor       *certify.Floor      `json:"fit_floor,omitempty"`
	ResidualViews  [2]certify.Residual `json:"residual_views"`
	Masked         int                 `json:"masked"`
	QueryID        string              `json:"query_id,omitempty"`
	KernelScale    float64             `json:"kernel_scale"`
	QueriesPerDraw int                 `json:"queries_per_draw"`
}

// attribution is the attribution event of certificate c, the answer to ev on s, with
// the extra fields it encodes.
func (a *Answerer) attribution(s *serving.Model, ev stream.QueryEvent, delta float64, c *certify.Certificate) (stream.Attribution, extra, error) {
	scored := func(e certify.Entry) stream.Scored {
		id, view := s.EntryID(c.Ranking, e)
		return stream.Scored{ID: id, View: view, Score: e.Score, Radius: e.Radius, Cosine: e.Cosine}
	}
	cfg := a.cfg.Daemon
	at := stream.Attribution{
		Request: ev.Request, Model: s.Version, Verdict: string(c.Verdict),
		Lower: c.LowerTop, Upper: c.UpperRest,
		Budget:        stream.Budget{Heads: c.Budget.H, SketchDim: c.Budget.S, PerView: cfg.Pool.M, Pool: c.Budget.M},
		Delta:         delta,
		VarianceModel: c.VarianceModel,
		DeltaBy:       map[string]float64{"per_query": c.Allocation.PerQuery, "per_landmark": c.Allocation.PerLandmark},
		Score:         string(c.Ranking), Stable: c.Stable, Stability: c.Stability, ResidualFraction: c.ResidualFraction,
		Coverage: a.cfg.Coverage,
	}
	if c.VarianceModel != certify.VarianceExactKernel {
		at.SeedHash = serving.SeedHash(c.EvalSeed) // the seed itself is revealed when the draw retires
	} else if s.Exact != nil {
		at.ExactRows = s.Exact.Where()
	}
	for _, e := range c.TopK {
		at.TopK = append(at.TopK, scored(e))
	}
	ex := extra{ModelID: s.ID, Separation: c.Separation, K: c.K, RunnerUp: scored(c.RunnerUp),
		VarianceModel: c.VarianceModel, EvalDraw: c.EvalDraw, PaddedP: c.Budget.PaddedP, FitFloor: c.Floor,
		Masked: s.MaskedCount(), QueryID: ev.ID, KernelScale: s.Scale, QueriesPerDraw: cfg.Query.DrawQueries}
	if a.cfg.Residuals != nil {
		if r, ok := a.cfg.Residuals(); ok {
			ex.ResidualViews = [2]certify.Residual{serving.ResidualOf(r[0]), serving.ResidualOf(r[1])}
			at.Residual = r[0].Trace + r[1].Trace
		}
	}
	var err error
	if at.Extra, err = json.Marshal(ex); err != nil {
		return at, ex, err
	}
	return at, ex, nil
}

// uiAnswer is what /ui/answer shows of one committed answer.
func uiAnswer(a stream.Attribution, ex extra, ev stream.QueryEvent, secs float64) ui.Answer {
	u := ui.Answer{Request: a.Request, At: time.Now(), Model: a.Model, ModelID: ex.ModelID, Verdict: a.Verdict,
		K: ex.K, Lower: a.Lower, Upper: a.Upper, Separation: ex.Separation, VarianceModel: a.VarianceModel,
		Delta: a.Delta, QueryID: ev.ID, LatencyMS: secs * 1e3,
		Ranking: a.Score, AllPoints: certify.Ranking(a.Score).AllPoints(), Stable: a.Stable, Stability: a.Stability}
	if f := a.ResidualFraction; f != nil {
		e := 1 - *f
		u.Explained = &e
	}
	if ev.ID == "" {
		u.QueryX = ev.X
	}
	for _, s := range a.TopK {
		u.Top = append(u.Top, ui.Scored{ID: s.ID, View: s.View, Score: s.Score, Radius: s.Radius, Cosine: s.Cosine})
	}
	if ex.RunnerUp.ID != "" {
		r := ex.RunnerUp
		u.RunnerUp = &ui.Scored{ID: r.ID, View: r.View, Score: r.Score, Radius: r.Radius, Cosine: r.Cosine}
	}
	if f := ex.FitFloor; f != nil {
		u.Floor = fmt.Sprintf("floor separation %.4g: %s", f.FloorSeparation, map[bool]string{
			true: "fit-limited (refits alone could change the top-K)", false: "not limiting"}[f.FitLimited])
		if f.RadiusOverGap != nil {
			u.Floor += fmt.Sprintf(", fit radius over the gap at the cut %.3g", *f.RadiusOverGap)
		}
	}
	return u
}
