package serving

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"

	"github.com/cairnhq/cairn/certify"
)

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
	// Inputs are InputHash of each landmark's raw input as fitted, in landmark order: a
	// landmark whose point holds another input now is masked when the model is restored
	// (Restore), as the live daemon masked it when the input changed. Absent in models
	// from before it, whose landmarks are masked only when their point is gone.
	Inputs []string `json:"inputs,omitempty"`
}

// InputHash identifies a raw input: the first 16 bytes of SHA-256 over its float64 bit
// patterns (little-endian), in hex.
func InputHash(x []float64) string {
	h := sha256.New()
	var b [8]byte
	for _, v := range x {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
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
