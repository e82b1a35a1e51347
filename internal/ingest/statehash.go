package ingest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"slices"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
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
	h := &stateHasher{h: sha256.New()}
	err = st.View(func(tx *storage.ReadTx) error {
		if err := h.points(tx, withOffsets); err != nil {
			return err
		}
		if err := h.pool(tx, feat.Fingerprint(), pcfg); err != nil {
			return err
		}
		return h.model(tx)
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.h.Sum(nil)), nil
}

// stateHasher writes stateHash's fields into h: u64s little-endian, strings and float
// slices with their lengths first.
type stateHasher struct {
	h hash.Hash
	b [8]byte
}

func (s *stateHasher) u(v uint64) { binary.LittleEndian.PutUint64(s.b[:], v); s.h.Write(s.b[:]) }

func (s *stateHasher) str(v string) { s.u(uint64(len(v))); s.h.Write([]byte(v)) }

func (s *stateHasher) floats(v []float64) {
	s.u(uint64(len(v)))
	for _, x := range v {
		s.u(math.Float64bits(x))
	}
}

// points hashes every stored point (id, input, label) and, with withOffsets, the
// stored offsets.
func (s *stateHasher) points(tx *storage.ReadTx, withOffsets bool) error {
	s.h.Write([]byte("points\x00"))
	if err := tx.ForEachPoint(func(p storage.Point) error {
		s.str(p.ID)
		s.floats(p.X)
		if p.HasLabel {
			s.u(1)
			s.u(uint64(p.Label))
		} else {
			s.u(0)
		}
		return nil
	}); err != nil {
		return err
	}
	if !withOffsets {
		return nil
	}
	s.h.Write([]byte("offsets\x00"))
	offs, err := tx.Offsets()
	if err != nil {
		return err
	}
	for _, o := range offs {
		s.str(o.Topic)
		s.u(uint64(o.Partition))
		s.u(uint64(o.Offset))
	}
	return nil
}

// pool hashes the pool's landmarks and per-point records, after checking that they
// belong to the pipeline fingerprint fp and budget pcfg and to the stored points.
func (s *stateHasher) pool(tx *storage.ReadTx, fp string, pcfg coreset.Config) error {
	s.h.Write([]byte("pool\x00"))
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
	if !ok {
		return nil
	}
	got, a, b, err := poolStates(ps, recs)
	if err != nil {
		return err
	}
	if got != fp || a.Config != pcfg {
		return fmt.Errorf("%w: the stored pool belongs to another model or budget", ErrPoolState)
	}
	if len(a.Points) != count || len(b.Points) != count {
		return fmt.Errorf("%w: %d stored points, pool records of %d and %d", ErrPoolState, count, len(a.Points), len(b.Points))
	}
	for _, id := range slices.Concat(a.Landmarks, b.Landmarks) {
		s.str(id)
	}
	s.h.Write([]byte("records\x00"))
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
		s.str(pa.ID)
		s.u(math.Float64bits(pa.Diag))
		s.u(math.Float64bits(pb.Diag))
	}
	return nil
}

// model hashes the latest stored model (nothing when there is none).
func (s *stateHasher) model(tx *storage.ReadTx) error {
	s.h.Write([]byte("model\x00"))
	m, ok, err := tx.LatestModel()
	if err != nil || !ok {
		return err
	}
	for _, id := range m.Landmarks {
		s.str(id)
	}
	s.floats(m.A.Data)
	s.floats(m.A0.Data)
	s.floats(m.B.Data)
	s.str(string(m.Meta))
	return nil
}
