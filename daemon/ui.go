package daemon

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/internal/status"
	"github.com/cairnhq/cairn/internal/ui"
)

// uiHandler is the /ui handler over the daemon (uiSource).
func (d *Daemon) uiHandler() http.Handler {
	sh := d.feat.Shape()
	return ui.New(uiSource{d}, ui.Shape{C: sh[0], H: sh[1], W: sh[2]}, d.log)
}

// runUISamples records one ui.Reading every ui.sample_interval until ctx ends.
func (d *Daemon) runUISamples(ctx context.Context) error {
	return d.ui.Sample(ctx, d.cfg.UI.SampleInterval, d.uiReading)
}

// uiReading is the current ui.Reading from Status.
func (d *Daemon) uiReading() ui.Reading {
	st := d.Status()
	return ui.Reading{At: time.Now(), Events: st.Ingest.Upserts + st.Ingest.Deletes + st.Ingest.Missing,
		Points: st.Points, Pool: st.Landmarks, TraceR: [2]float64{st.Residual[0].TraceR, st.Residual[1].TraceR},
		Deff: math.Float64frombits(d.deff.Load()), Refits: st.Refits, Deletions: st.Ingest.Deletes}
}

// uiSource is the daemon as the UI reads it (ui.Source).
type uiSource struct{ d *Daemon }

// Overview implements ui.Source.
func (s uiSource) Overview() ui.Overview {
	st := s.d.Status()
	o := ui.Overview{Role: st.Role, Leading: st.Leading, Ready: st.Ready, Model: st.Model, ModelID: st.ModelID,
		ModelPoints: st.ModelPoints, Points: st.Points, Landmarks: st.Landmarks, Masked: st.Masked,
		PendingDeletions: st.PendingDeletions, Refits: st.Refits, Queries: st.Queries,
		Samples: s.d.ui.Samples(), Recent: s.d.ui.Recent(20), Labels: labelRows(st)}
	o.Backbone, o.Coverage = status.UIBackbone(st.Backbone)
	return o
}

// labelRows are the overview's per-label rows of st (ui.LabelRows).
func labelRows(st StatusReport) []ui.LabelRow {
	rows := make([]ui.LabelRow, 0, len(st.Labels))
	for l, c := range st.Labels {
		rows = append(rows, ui.LabelRow{Label: l, Points: c.Points, Landmarks: c.Landmarks})
	}
	return ui.LabelRows(rows)
}

// Answer implements ui.Source.
func (s uiSource) Answer(request string) (ui.Answer, bool) { return s.d.ui.Answer(request) }

// Point implements ui.Source: a stored point's raw input from the point cache, or on a
// replica (no cache) an unmasked gradient row's or landmark's input from the serving
// model. A deleted point is in neither.
func (s uiSource) Point(id string) ([]float64, bool) {
	if c := s.d.train.cache.Load(); c != nil {
		if e := c.Get(id); e != nil {
			return e.X, true
		}
		return nil, false
	}
	if m := s.d.serve.model.Load(); m != nil {
		if x, ok := m.GradInput(id); ok {
			return x, true
		}
		return m.LandmarkInput(id)
	}
	return nil, false
}

// Audits implements ui.Source: the stored audit chain, checked (status.UIAudits).
func (s uiSource) Audits() ([]ui.Audit, error) {
	if s.d.store == nil {
		return nil, fmt.Errorf("a %s keeps no audit chain", s.d.cfg.Role)
	}
	return status.UIAudits(s.d.store, s.d.signer)
}
