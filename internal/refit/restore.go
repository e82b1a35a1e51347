package refit

import (
	"context"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/storage"
)

// Restore rebuilds the serving form of the latest model of st after a restart, with
// the landmarks no longer stored in cache, or whose input changed since the fit,
// masked (serving.Restore, as the live daemon masked them), and returns it with the
// hash of the points it was fitted on (nil, "" without a model). The audit blocks are
// rebuilt from the points stored now by the same rules as Fit.
func (f *Fitter) Restore(st *storage.Store, cache *ingest.Points) (*serving.Model, string, error) {
	var (
		m      storage.Model
		ok     bool
		fs     storage.FitStats
		haveFS bool
	)
	err := st.View(func(tx *storage.ReadTx) error {
		var err error
		if m, ok, err = tx.LatestModel(); err != nil || !ok {
			return err
		}
		fs, haveFS, err = tx.FitStats(m.Version)
		return err
	})
	if err != nil || !ok {
		return nil, "", err
	}
	rm, err := serving.Restore(f.Features, m, func(id string) ([]float64, bool) {
		if e := cache.Get(id); e != nil {
			return e.X, true
		}
		return nil, false
	})
	if err != nil {
		return nil, "", err
	}
	meta, mm := rm.Meta, len(m.Landmarks)
	si := serving.Input{Version: m.Version, ID: meta.ID, Points: meta.Points, LandmarkIDs: m.Landmarks,
		Views: rm.Views, Missing: rm.Missing, A: rm.A, B: m.B.Data, Scale: meta.KernelScale,
		Residual: meta.Residual, LandmarkX: rm.Xs, Omega: rm.Omega, PoolStability: meta.PoolStability()}
	if haveFS && len(fs.Mean) == mm {
		si.OmegaMean = fs.Mean
		if len(fs.Var) == mm {
			si.Tau2 = fs.Var
		}
	}
	// The gradient rows of the points stored now: the model's own when the points hash
	// matches, else those plus the points since the fit until the refit that follows.
	now := ingest.SnapshotOf(cache)
	si.Grad, si.GradErr = f.gradRows(now.IDs, now.Entries)
	if err := f.restoreAuditBlocks(&si, m, rm, cache); err != nil {
		return nil, "", err
	}
	s, err := f.Serve(si)
	if err != nil {
		return nil, "", err
	}
	f.Log.Info().Uint64("model", m.Version).Str("model_id", meta.ID).Int("masked", s.MaskedCount()).Msg("model restored")
	return s, meta.PointsHash, nil
}

// restoreAuditBlocks sets si's audit blocks from the points stored now in cache, as Fit
// picks them, against the fit-draw features of m's landmarks (rm: m restored).
func (f *Fitter) restoreAuditBlocks(si *serving.Input, m storage.Model, rm *serving.Restored, cache *ingest.Points) error {
	feat, seed, mm := f.Features, f.Config.Model.Seed, len(m.Landmarks)
	var lf []float64
	for l, id := range m.Landmarks {
		if rm.Missing[l] {
			lf = append(lf, make([]float64, feat.Dim())...)
			continue
		}
		row, err := ingest.FeatureRows(context.Background(), feat, []string{id}, []*ingest.Entry{cache.Get(id)}, rm.View(l))
		if err != nil {
			return err
		}
		for _, x := range row[0] {
			lf = append(lf, float64(x))
		}
	}
	snap := ingest.SnapshotOf(cache)
	ids := snap.IDs
	var tr, va []int
	for i, id := range ids {
		if isVal(seed, id, f.Config.Fit.ValFraction) {
			va = append(va, i)
		} else {
			tr = append(tr, i)
		}
	}
	refRows := auditRows(seed, "ref", snap, tr, f.Config.Audit.Reference)
	testRows := auditRows(seed, "test", snap, va, f.Config.Audit.Test)
	if len(refRows) >= 2 && len(testRows) >= 1 {
		lm := mat.NewDense(mm, feat.Dim(), lf)
		against := func(rows []int) *mat.Dense {
			rid, ren := pick(ids, snap.Entries, rows)
			g, _ := ingest.FeatureRows(context.Background(), feat, rid, ren, 0) // no ctx: cannot fail
			k := mat.NewDense(len(rows), mm, nil)
			pipeline.KernelTo(k, g, lm)
			k.Scale(rm.Meta.KernelScale, k)
			return k
		}
		si.KRef, si.KTest = against(refRows), against(testRows)
		si.RefLabels = labelsOf(snap.Entries, refRows)
	}
	return nil
}
