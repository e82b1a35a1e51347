package refit

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// Baseline is what the drift triggers compare against: the last fit's snapshot size,
// landmarks and residual ratio.
type Baseline struct {
	Points    int
	Landmarks []string
	Ratio     float64
}

// Baseline is the drift baseline of the fitted model.
func (ft *Fitted) Baseline() Baseline {
	b := Baseline{Points: ft.Meta.Points, Landmarks: ft.Model.Landmarks}
	if k := ft.Meta.Residual[0].TraceK + ft.Meta.Residual[1].TraceK; k > 0 {
		b.Ratio = (ft.Meta.Residual[0].TraceR + ft.Meta.Residual[1].TraceR) / k
	}
	return b
}

// Ratio is Σ tr R / Σ tr K over both views (0 for an empty pool).
func Ratio(c [2]coreset.ResidualCertificate) float64 {
	k := c[0].TraceK + c[1].TraceK
	if k <= 0 {
		return 0
	}
	return (c[0].Trace + c[1].Trace) / k
}

// Pool is the ingest as the triggers read it (*ingest.State; the caller holds its
// lock).
type Pool interface {
	Len() int
	Landmarks() []string
	Residuals() [2]coreset.ResidualCertificate
	Certificates() (a, b coreset.ResidualCertificate)
	LastPending() *ingest.Deletion
	PendingCount() int
	SyncDue() bool
}

// Drift is the state the triggers judge besides the pool.
type Drift struct {
	Changes   int       // points upserted or deleted since the last snapshot
	LastTrain time.Time // the last training batch that changed a point
	LastFit   Baseline
	LastSyncN int  // stored points at the last adopted sync
	Leading   bool // only the leader refits for deletions (it audits them)
	HasModel  bool
	// CaughtUp reports whether every message of the training topic has been applied
	// (it asks the broker, so it is called only when a trigger needs it).
	CaughtUp func() bool
	// Backlog is the training topic's messages not yet applied at the last lag poll
	// (called only when Hold needs it; nil counts as none). HeldSince is when the
	// drift refit that Hold keeps waiting was first held (zero: none is).
	Backlog   func() int64
	HeldSince time.Time
	// OwnFit reports whether the serving model is the store's own latest fit, not one
	// adopted from the leader's models topic (called only when Hold needs it; nil counts
	// as own).
	OwnFit func() bool
}

// BacklogBatch is the backlog, in training messages, at which Hold keeps a drift refit
// waiting. It is a fixed count, whatever limits.batch_events is: the default of
// stream.ReaderConfig.MaxBatch, and two of the daemon's training batches at the default
// limits.batch_events (256). A daemon that keeps up with its stream is behind by less
// between two lag polls.
const BacklogBatch = 512

// Hold reports whether the refit that Reason names must wait for the training topic's
// backlog to be applied: a points_changed, pool_changed or residual_increase refit
// while at least BacklogBatch messages wait, for at most refit.backlog_wait from when
// it was first held. A refit then shares the cores with the ingestion it would soon be
// stale against, so holding it until the backlog is in gives the same model sooner, as
// the background syncs already wait (SyncDue); measured on 60,000 MNIST points, the
// ingest went from 831 to 1,075 events/s and the run ended 40 s sooner
// (docs/performance.md). Deletions (their audits), the first fit (no
// answer before it), the first fit of a store whose daemon serves a model adopted from
// the models topic (until then its state holds no fit of its own points) and idle
// (caught up already) never wait.
func Hold(r config.Refit, reason string, d Drift, now time.Time) bool {
	switch reason {
	case "points_changed", "pool_changed", "residual_increase":
	default:
		return false
	}
	if r.BacklogWait <= 0 || (!d.HeldSince.IsZero() && now.Sub(d.HeldSince) >= r.BacklogWait) {
		return false
	}
	return d.Backlog != nil && d.Backlog() >= BacklogBatch && (d.OwnFit == nil || d.OwnFit())
}

// Reason names the drift trigger of r that fires now, or "": a debounced deletion
// ("deletion", the leader's only), the first fit ("first_fit"), refit.points_changed
// points changed, refit.pool_change_fraction of the landmarks replaced
// ("pool_changed"), a refit.residual_increase relative rise of tr R / tr K, or
// refit.idle without training events while the points differ from the model's and the
// training topic is caught up ("idle").
func Reason(r config.Refit, p Pool, d Drift, now time.Time) string {
	// Deletions are the leader's to audit: a standby leaves them to the leader's
	// refit (its own state follows through the other triggers).
	if last := p.LastPending(); last != nil && r.OnDelete && d.Leading && now.Sub(last.Applied) >= r.DeleteDebounce {
		return "deletion" // deletions within the debounce share this refit
	}
	if p.Len() < r.MinPoints {
		return ""
	}
	// Idle means caught up, not merely paused (a sync holds ingestion for a while).
	idle := r.Idle > 0 && d.Changes > 0 && now.Sub(d.LastTrain) >= r.Idle && d.CaughtUp()
	many := r.PointsChanged > 0 && d.Changes >= r.PointsChanged
	if !d.HasModel {
		if idle || many {
			return "first_fit"
		}
		return ""
	}
	if many {
		return "points_changed"
	}
	if r.PoolChangeFraction > 0 && d.Changes > 0 {
		cur := p.Landmarks()
		changed := 0
		for _, id := range cur {
			if !slices.Contains(d.LastFit.Landmarks, id) {
				changed++
			}
		}
		if len(cur) > 0 && float64(changed) >= r.PoolChangeFraction*float64(len(cur)) {
			return "pool_changed"
		}
	}
	if r.ResidualIncrease > 0 && d.Changes > 0 && d.LastFit.Ratio > 0 &&
		Ratio(p.Residuals())/d.LastFit.Ratio-1 >= r.ResidualIncrease {
		return "residual_increase"
	}
	if idle {
		return "idle"
	}
	return ""
}

// SyncDue reports whether a background sync should run now: the pool is inexact (a
// landmark was deleted) or stale over pool.sync_stale_fraction of its budget
// (ingest.State.SyncDue), and either a landmark deletion made it inexact with no
// deletion refit pending (that refit syncs anyway), or the points have doubled since
// the last sync and the training topic is caught up. This schedule is our choice:
// while a pool fills, nearly every insert displaces a pivot, and syncing at every
// threshold crossing would cost O(n q m) per batch; doubling keeps the total O(n q m),
// and waiting until the backlog is applied keeps those cores for ingestion (measured:
// background syncs during a 2,000-point burst halved the ingest rate). Between syncs
// the certificate is a valid bound that says it is one, and every refit syncs.
func SyncDue(r config.Refit, p Pool, d Drift) bool {
	if !p.SyncDue() {
		return false
	}
	a, b := p.Certificates()
	if !a.Exact || !b.Exact {
		return !(r.OnDelete && p.PendingCount() > 0)
	}
	return p.Len() >= 2*max(d.LastSyncN, 1) && d.CaughtUp()
}

// Effects computes the deletion effect of every pending deletion (rec.Effect), before
// the refit's write transaction: on the model each deletion was applied to, or, after a
// restart, on cur, the model serving now (audit.random random sets, seeded by seed).
func Effects(pending []*ingest.Deletion, cur *serving.Model, random int, seed uint64) {
	for _, rec := range pending {
		base := rec.Before
		if base == nil {
			base = cur
		}
		if base != nil && rec.Known {
			rec.Effect = base.DeletionEffect(rec.ID, rec.Request, random, seed)
		}
	}
}

// StatusEvent is the encoded "model" status event of the refit that made ft
// (version), for trigger reason, with the number of audits it answers and its wall
// time secs, stamped done.
func (ft *Fitted) StatusEvent(version uint64, reason string, audits int, secs float64, done time.Time) ([]byte, error) {
	status := map[string]any{
		"version": version, "id": ft.Meta.ID, "points": ft.Meta.Points, "train": ft.Meta.Train,
		"val": ft.Meta.Val, "reason": reason, "seconds": secs, "selected_by": ft.Meta.SelectedBy,
		"best_epoch": ft.Meta.BestEpoch, "residual": ft.Meta.Residual, "audits": audits,
	}
	sdata, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	return stream.Status{Kind: "model", Time: done.UTC(), Data: sdata}.Encode()
}

// deffRidge is the overview's ridge for d_eff when the pool budget is a fixed m (with
// pool.budget "deff:λ" the configured λ is used): λ = deffRidge·tr K̃/n, a thousandth
// of the mean diagonal, so the number does not depend on the kernel's scale.
const deffRidge = 1e-3

// Deff is view A's d_eff over n points under the greedy landmarks of sel
// (coreset.NystromDeff with ridge lambda, or deffRidge·tr K̃/n when lambda is not
// positive), for the UI's overview; ok is false when it cannot be computed.
func Deff(sel *ingest.Selection, n int, lambda float64) (v float64, ok bool) {
	r := sel.Res[0]
	if r.Gram == nil || n == 0 {
		return math.NaN(), false
	}
	if !(lambda > 0) {
		lambda = deffRidge * r.Trace / float64(n)
	}
	v, err := coreset.NystromDeff(r.Gram, r.Greedy, lambda)
	return v, err == nil
}
