package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/status"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/storage"
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
// replica (no cache) an unmasked landmark's augmented input from the serving model.
// A deleted point is in neither.
func (s uiSource) Point(id string) ([]float64, bool) {
	if c := s.d.train.cache.Load(); c != nil {
		if e := c.Get(id); e != nil {
			return e.X, true
		}
		return nil, false
	}
	if m := s.d.serve.model.Load(); m != nil {
		return m.LandmarkInput(id)
	}
	return nil, false
}

// Audits implements ui.Source: the stored audit chain, each record checked against its
// predecessor (prev_hash) and the chain as a whole (storage.Store.VerifyAudit). The store
// keeps no signatures (the publisher signs, deterministically), so a record's signature
// is recomputed under the daemon's key and verified: this says which key signs it and
// that the key works, not what is on the topic (cairnctl audit verify checks that).
func (s uiSource) Audits() ([]ui.Audit, error) {
	d := s.d
	if d.store == nil {
		return nil, fmt.Errorf("a %s keeps no audit chain", d.cfg.Role)
	}
	chainErr := d.store.VerifyAudit()
	var out []ui.Audit
	var prev [32]byte
	err := d.store.View(func(tx *storage.ReadTx) error {
		return tx.ForEachAudit(1, func(r storage.AuditRecord) error {
			var b ingest.AuditBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				return fmt.Errorf("audit %d: %w", r.Seq, err)
			}
			a := ui.Audit{Seq: r.Seq, Hash: hex.EncodeToString(r.Hash[:]), PrevHash: hex.EncodeToString(r.PrevHash[:]),
				ChainOK: chainErr == nil && r.PrevHash == prev, Request: b.Request, ID: b.ID, Known: b.Known,
				WasLandmark: b.WasLandmark, ModelBefore: b.ModelBefore, ModelAfter: b.ModelAfter,
				Percentile: b.Percentile, PValue: b.PValue, Requested: b.Requested, RefitDone: b.RefitDone}
			if d.signer != nil {
				a.KeyID = d.signer.KeyID()
				a.SignatureOK = auditsig.VerifyRecord(d.signer.PublicKey(), r.Seq, r.PrevHash, r.Hash,
					d.signer.SignRecord(r.Seq, r.PrevHash, r.Hash))
			}
			prev = r.Hash
			out = append(out, a)
			return nil
		})
	})
	return out, err
}
