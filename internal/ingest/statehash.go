package ingest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/storage"
)

// StateHash summarizes the replayable state in st, as configured by cfg: SHA-256 over
// the stored points (id, input, label, in id order), the consumed offsets, the served
// landmarks of both views, the pool's per-point records (id and both views' K_jj, in id
// order, from the poolpoints bucket or a schema 2 blob alike), and the latest model's
// landmarks, Ã, Ã₀, b and metadata. Two daemons fed the same input messages have equal
// hashes once both are quiescent, however often either was killed (the kill -9 test
// compares them). It leaves out what legitimately depends on timing: model version
// numbers and how many refits ran, the audit and outbox records (they carry wall-clock
// timestamps), and the pool's running certificate sums and per-point residuals (the
// last bits depend on where batches were cut and when syncs ran: an insert's residual
// is a forward solve against the pool served at that moment, a sync's comes out of
// greedy). K_jj = ||ψ_j||² is a function of the point alone, bit for bit. It fails
// when the records do not match the stored points one to one. The daemon must not be
// running on st's file.
func StateHash(cfg config.Config, st *storage.Store) (string, error) {
	return stateHash(cfg, st, true)
}

// ContentHash is StateHash without the consumed offsets: equal for two daemons that
// hold the same points, pool and model whatever input topics they read them from (a
// compacted topic, or one replayed elsewhere, numbers its records differently).
func ContentHash(cfg config.Config, st *storage.Store) (string, error) {
	return stateHash(cfg, st, false)
}

func stateHash(cfg config.Config, st *storage.Store, withOffsets bool) (string, error) {
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return "", err
	}
	pcfg, err := PoolConfig(cfg, feat.Dim())
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var b [8]byte
	u := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	str := func(s string) { u(uint64(len(s))); h.Write([]byte(s)) }
	floats := func(v []float64) {
		u(uint64(len(v)))
		for _, x := range v {
			u(math.Float64bits(x))
		}
	}
	err = st.View(func(tx *storage.ReadTx) error {
		h.Write([]byte("points\x00"))
		if err := tx.ForEachPoint(func(p storage.Point) error {
			str(p.ID)
			floats(p.X)
			if p.HasLabel {
				u(1)
				u(uint64(p.Label))
			} else {
				u(0)
			}
			return nil
		}); err != nil {
			return err
		}
		if withOffsets {
			h.Write([]byte("offsets\x00"))
			offs, err := tx.Offsets()
			if err != nil {
				return err
			}
			for _, o := range offs {
				str(o.Topic)
				u(uint64(o.Partition))
				u(uint64(o.Offset))
			}
		}
		h.Write([]byte("pool\x00"))
		count, err := tx.PointCount()
		if err != nil {
			return err
		}
		ps, ok, recs, err := readPool(tx)
		if err != nil {
			return err
		}
		if !ok && len(recs) > 0 {
			return fmt.Errorf("%w: %d per-point pool records but no pool state", ErrPoolState, len(recs))
		}
		if ok {
			fp, a, b, err := poolStates(ps, recs)
			if err != nil {
				return err
			}
			if fp != feat.Fingerprint() || a.Config != pcfg {
				return fmt.Errorf("%w: the stored pool belongs to another model or budget", ErrPoolState)
			}
			if len(a.Points) != count || len(b.Points) != count {
				return fmt.Errorf("%w: %d stored points, pool records of %d and %d", ErrPoolState, count, len(a.Points), len(b.Points))
			}
			for _, id := range slices.Concat(a.Landmarks, b.Landmarks) {
				str(id)
			}
			h.Write([]byte("records\x00"))
			for i, pa := range a.Points {
				pb := b.Points[i]
				if pa.ID != pb.ID {
					return fmt.Errorf("%w: pool record %d is of %q in view a, %q in view b", ErrPoolState, i, pa.ID, pb.ID)
				}
				if _, found, err := tx.Point(pa.ID); err != nil {
					return err
				} else if !found {
					return fmt.Errorf("%w: per-point pool record of %q, which is not a stored point", ErrPoolState, pa.ID)
				}
				str(pa.ID)
				u(math.Float64bits(pa.Diag))
				u(math.Float64bits(pb.Diag))
			}
		}
		h.Write([]byte("model\x00"))
		m, ok, err := tx.LatestModel()
		if err != nil || !ok {
			return err
		}
		for _, id := range m.Landmarks {
			str(id)
		}
		floats(m.A.Data)
		floats(m.A0.Data)
		floats(m.B.Data)
		str(string(m.Meta))
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
