package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// errServingChanged makes a query batch recompute: the serving model changed (a
// deletion masked a landmark, or a refit installed a model) between computing the
// answers and committing them, and an answer committed after a deletion must not name
// the deleted point.
var errServingChanged = errors.New("daemon: serving model changed during the batch")

// queryOut is the outcome of one query message: an attribution or a dead letter.
type queryOut struct {
	msg     stream.Message
	skip    bool
	topic   string
	key     []byte
	value   []byte
	verdict string
	secs    float64
	ui      ui.Answer // what /ui/answer shows, recorded once the answer is committed
}

// handleQueries answers one batch of cairn.queries: each valid query gets a certified
// attribution from the serving model, emitted to cairn.attributions through the
// outbox in one transaction with the batch's offsets; invalid ones and queries naming
// unknown ids go to the dead-letter topic. Before the first model exists it waits (the
// queries stay in Kafka). The commit checks that the serving model is still the one the
// answers were computed on, else the batch is recomputed.
func (d *Daemon) handleQueries(ctx context.Context, batch []stream.Message) error {
	select {
	case <-d.serve.modelReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := d.waitOutbox(ctx); err != nil {
		return err
	}
	w := &d.query.work
	for {
		s := d.serve.model.Load()
		if s != nil && s.Draw != nil && s.Draw.Used.Load()+int64(len(batch)) > int64(d.cfg.Query.DrawQueries) {
			if err := d.redraw(s); err != nil {
				return err
			}
			continue
		}
		outs := d.answerAll(w, s, batch)
		seen := map[partition]int64{}
		err := d.store.Apply(func(tx *storage.Tx) error {
			if d.serve.model.Load() != s {
				return errServingChanged
			}
			for _, o := range outs {
				if o.skip {
					continue
				}
				if _, err := tx.Enqueue(o.topic, o.key, o.value); err != nil {
					return err
				}
				if err := tx.SetOffset(o.msg.Topic, int32(o.msg.Partition), o.msg.Offset); err != nil {
					return err
				}
				seen[partition{o.msg.Topic, o.msg.Partition}] = o.msg.Offset
			}
			return nil
		})
		if errors.Is(err, errServingChanged) {
			continue
		}
		if err != nil {
			return err
		}
		d.faults.Recovered("queries")
		for k, off := range seen {
			d.query.last[k] = off
		}
		for _, o := range outs {
			switch {
			case o.skip:
			case o.verdict != "":
				d.query.count.Add(1)
				s.CountDraw() // an answer implies s != nil
				d.metrics.ObserveQuery(o.secs, o.verdict)
				d.metrics.AddEvents(o.msg.Topic, "applied", 1)
				d.ui.Answered(o.ui)
			default:
				d.metrics.AddEvents(o.msg.Topic, "dead_letter", 1)
			}
		}
		return nil
	}
}

// answerAll decodes and answers one batch of query messages on s: every valid query is
// certified in one s.AnswerBatch (the exact rows read once for the batch), every invalid
// one and every failure becomes a dead letter, and re-deliveries of answered offsets are
// skipped.
func (d *Daemon) answerAll(w *serving.Workspace, s *serving.Model, batch []stream.Message) []queryOut {
	t0 := time.Now()
	outs := make([]queryOut, len(batch))
	var (
		idx    []int
		evs    []stream.QueryEvent
		xs     [][]float64
		ks     []int
		deltas []float64
		ranks  []certify.Ranking
	)
	for i, m := range batch {
		outs[i].msg = m
		if last, ok := d.query.last[partition{m.Topic, m.Partition}]; ok && m.Offset <= last {
			outs[i].skip = true
			continue
		}
		ev, err := stream.DecodeQuery(m.Value, d.query.lim)
		var x []float64
		if err == nil {
			x, err = d.queryInput(s, ev)
		}
		if err != nil {
			d.deadLetter(&outs[i], err)
			continue
		}
		k, delta := ev.K, ev.Delta
		if k == 0 {
			k = d.cfg.Query.K
		}
		if delta == 0 {
			delta = d.cfg.Query.Delta
		}
		idx, evs, xs, ks, deltas = append(idx, i), append(evs, ev), append(xs, x), append(ks, k), append(deltas, delta)
		ranks = append(ranks, d.ranking(ev))
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
			d.deadLetter(o, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "model", Msg: errs[j].Error()})
			continue
		}
		a, ex, err := d.attributionOf(s, evs[j], deltas[j], &certs[j])
		var v []byte
		if err == nil {
			v, err = a.Encode()
		}
		if err != nil {
			d.log.Error().Err(err).Str("request", evs[j].Request).Msg("attribution does not encode")
			o.skip = true
			continue
		}
		o.topic, o.key, o.value, o.verdict, o.secs = d.cfg.Kafka.Topics.Attributions, []byte(evs[j].Request), v, a.Verdict, secs
		o.ui = uiAnswer(a, ex, evs[j], secs)
	}
	return outs
}

// deadLetter makes o the dead letter of its message for err.
func (d *Daemon) deadLetter(o *queryOut, err error) {
	m := o.msg
	dm, derr := stream.DeadLetterMessage(d.cfg.Kafka.Topics.DLQ, m, err, d.cfg.Kafka.DLQKeepRaw)
	if derr != nil { // the dead letter itself does not encode: a daemon bug
		d.log.Error().Err(derr).Msg("dead letter for a query")
		o.skip = true
		return
	}
	d.metrics.AddReject(string(stream.ReasonOf(err)), 1)
	d.log.Warn().Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
		Str("reason", string(stream.ReasonOf(err))).Err(err).Msg("dead-lettered a query")
	o.topic, o.key, o.value = dm.Topic, dm.Key, dm.Value
}

// attributionExtra is the "extra" object of an attribution event: the rest of the
// certificate (DESIGN.md section 5), so a user can recompute the answer.
type attributionExtra struct {
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

// queryInput is the input a query asks about: its x, or the stored point's raw input
// for a query by id; an error when there is no such point or no model.
func (d *Daemon) queryInput(s *serving.Model, ev stream.QueryEvent) ([]float64, error) {
	x := ev.X
	if ev.ID != "" {
		cache := d.train.cache.Load()
		if cache == nil { // a replica stores no points
			return nil, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "id",
				Msg: "a replica holds no stored points: ask by input, or let the primary answer queries by id (query.on_primary)"}
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

// attribute answers one decoded query on s.
func (d *Daemon) attribute(w *serving.Workspace, s *serving.Model, ev stream.QueryEvent) (stream.Attribution, error) {
	x, err := d.queryInput(s, ev)
	if err != nil {
		return stream.Attribution{}, err
	}
	k, delta := ev.K, ev.Delta
	if k == 0 {
		k = d.cfg.Query.K
	}
	if delta == 0 {
		delta = d.cfg.Query.Delta
	}
	c, err := s.AnswerRanked(w, x, k, delta, d.ranking(ev))
	if err != nil {
		return stream.Attribution{}, &stream.RejectError{Reason: stream.ReasonUnavailable, Field: "model", Msg: err.Error()}
	}
	return d.attribution(s, ev, delta, &c)
}

// ranking is the ranking a query asks for: its "score", else query.score (both
// validated: the decoder's names are certify's, and config.Validate checks the default).
func (d *Daemon) ranking(ev stream.QueryEvent) certify.Ranking {
	if ev.Score != "" {
		return certify.Ranking(ev.Score)
	}
	return certify.Ranking(d.cfg.Query.Score)
}

// attribution is the attribution event of certificate c, the answer to ev on s.
func (d *Daemon) attribution(s *serving.Model, ev stream.QueryEvent, delta float64, c *certify.Certificate) (stream.Attribution, error) {
	a, _, err := d.attributionOf(s, ev, delta, c)
	return a, err
}

// attributionOf is attribution with the extra fields it encodes.
func (d *Daemon) attributionOf(s *serving.Model, ev stream.QueryEvent, delta float64, c *certify.Certificate) (stream.Attribution, attributionExtra, error) {
	scored := func(e certify.Entry) stream.Scored {
		return stream.Scored{ID: s.LandmarkIDs[e.Index], View: string(s.Views[e.Index]), Score: e.Score, Radius: e.Radius}
	}
	p := d.pool.Load()
	a := stream.Attribution{
		Request: ev.Request, Model: s.Version, Verdict: string(c.Verdict),
		Lower: c.LowerTop, Upper: c.UpperRest,
		Budget:        stream.Budget{Heads: c.Budget.H, SketchDim: c.Budget.S, PerView: d.cfg.Pool.M, Pool: c.Budget.M},
		Delta:         delta,
		VarianceModel: c.VarianceModel,
		DeltaBy:       map[string]float64{"per_query": c.Allocation.PerQuery, "per_landmark": c.Allocation.PerLandmark},
		Score:         string(c.Ranking), Stable: c.Stable, Stability: c.Stability, ResidualFraction: c.ResidualFraction,
	}
	if c.VarianceModel != certify.VarianceExactKernel {
		a.SeedHash = serving.SeedHash(c.EvalSeed) // the seed itself is revealed when the draw retires
	}
	for _, e := range c.TopK {
		a.TopK = append(a.TopK, scored(e))
	}
	ex := attributionExtra{ModelID: s.ID, Separation: c.Separation, K: c.K, RunnerUp: scored(c.RunnerUp),
		VarianceModel: c.VarianceModel, EvalDraw: c.EvalDraw, PaddedP: c.Budget.PaddedP, FitFloor: c.Floor,
		Masked: s.MaskedCount(), QueryID: ev.ID, KernelScale: s.Scale, QueriesPerDraw: d.cfg.Query.DrawQueries}
	if p != nil {
		ex.ResidualViews = [2]certify.Residual{serving.ResidualOf(p.residual[0]), serving.ResidualOf(p.residual[1])}
		a.Residual = p.residual[0].Trace + p.residual[1].Trace
	}
	var err error
	if a.Extra, err = json.Marshal(ex); err != nil {
		return a, ex, err
	}
	return a, ex, nil
}

// Answer computes the certified attribution of one query on the serving model, in
// process (no Kafka, nothing stored): what the query path emits for q. It returns
// ErrNoModel before the first model. It counts against the evaluation draw's query
// budget like any answer.
func (d *Daemon) Answer(q stream.QueryEvent) (stream.Attribution, error) {
	s := d.serve.model.Load()
	if s == nil {
		return stream.Attribution{}, ErrNoModel
	}
	w, _ := d.query.answerWork.Get().(*serving.Workspace)
	if w == nil {
		w = new(serving.Workspace)
	}
	defer d.query.answerWork.Put(w)
	a, err := d.attribute(w, s, q)
	if err == nil {
		s.CountDraw()
	}
	return a, err
}

// redraw replaces the serving model's evaluation draw, whose query budget is used up,
// with a fresh one (same model, same mask).
func (d *Daemon) redraw(s *serving.Model) error {
	ns, err := d.newServing(s.Input())
	if err != nil {
		return err
	}
	d.serve.mu.Lock()
	if d.serve.model.Load() != s {
		d.serve.mu.Unlock()
		return nil // changed meanwhile; the caller reloads
	}
	d.serve.model.Store(ns)
	d.serve.mu.Unlock()
	d.log.Info().Uint64("model", s.Version).Str("eval_seed_hash", serving.SeedHash(ns.Draw.Seed)).Msg("new evaluation draw")
	d.retire(s.Version, s.Draw)
	return nil
}

// retire publishes the seed of an evaluation draw that no answer will use any more (a
// new draw or a new model replaced it) on the status topic, kind "eval_draw": answers
// carried only its hash, so queries could not be chosen against it while it served.
func (d *Daemon) retire(version uint64, dr *serving.Draw) {
	if dr == nil {
		return
	}
	d.emitStatus("eval_draw", map[string]any{"model": version, "seed": dr.Seed, "seed_hash": serving.SeedHash(dr.Seed),
		"answers": dr.Used.Load()})
}
