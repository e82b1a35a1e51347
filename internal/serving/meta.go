package serving

import "github.com/cairnhq/cairn/certify"

// Meta is storage.Model.Meta (JSON): what a model version needs besides its
// matrices to be served again after a restart. It holds nothing that depends on timing,
// so the stored model is a function of the points it was fitted on.
type Meta struct {
	// ViewA is the number of leading landmarks that are view A's pivots; the rest are
	// view B's.
	ViewA       int                 `json:"view_a"`
	KernelScale float64             `json:"kernel_scale"`
	Points      int                 `json:"points"`
	Train       int                 `json:"train"`
	Val         int                 `json:"val"`
	Loss        string              `json:"loss"`
	Init        string              `json:"init"`
	Fits        int                 `json:"fits"`
	SelectedBy  string              `json:"selected_by"`
	BestEpoch   int                 `json:"best_epoch"`
	Epochs      int                 `json:"epochs"`
	Residual    [2]certify.Residual `json:"residual"`
	ID          string              `json:"id"`
	// PointsHash identifies the points fitted on (pointsHash): a restarted daemon
	// refits when the stored points differ.
	PointsHash string `json:"points_hash"`
	// Reseed is the pool part of the answers' stability, measured at the fit
	// (ingest.MeasureReseed); absent in models from before it, whose answers are then
	// never stable.
	Reseed *ReseedMeta `json:"reseed,omitempty"`
}

// ReseedMeta is the stored form of a reseed measurement: the mean top-k Jaccard of the
// queries, the two pools' id Jaccard, the reseeded seed, and the sample's size and k.
type ReseedMeta struct {
	Jaccard     float64 `json:"jaccard"`
	PoolJaccard float64 `json:"pool_jaccard"`
	Seed        uint64  `json:"seed"`
	Queries     int     `json:"queries"`
	K           int     `json:"k"`
}

// PoolStability is the pool part of the stability a model's meta records, or nil.
func (m Meta) PoolStability() *float64 {
	if m.Reseed == nil {
		return nil
	}
	j := m.Reseed.Jaccard
	return &j
}
