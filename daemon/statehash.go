package daemon

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
)

// StateHash summarizes the replayable state in st, as configured by cfg: SHA-256 over
// the stored points (id, input, label, in id order), the consumed offsets, the served
// landmarks of both views, and the latest model's landmarks, Ã, Ã₀, b and metadata.
// Two daemons fed the same input messages have equal hashes once both are quiescent,
// however often either was killed (the kill -9 test compares them). It leaves out what
// legitimately depends on timing: model version numbers and how many refits ran, the
// audit and outbox records (they carry wall-clock timestamps), and the pool's running
// certificate sums (the last bits depend on where batches were cut). The daemon must
// not be running on st's file.
func StateHash(cfg config.Config, st *storage.Store) (string, error) {
	feat, err := NewFeatures(cfg.Model, cfg.Sketch)
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
		h.Write([]byte("pool\x00"))
		if ps, ok, err := tx.PoolState(); err != nil {
			return err
		} else if ok {
			fp, a, b, err := parsePool(ps)
			if err != nil {
				return err
			}
			if fp != feat.Fingerprint() || a.Config != pcfg {
				return fmt.Errorf("%w: the stored pool belongs to another model or budget", ErrPoolState)
			}
			for _, id := range slices.Concat(a.Landmarks, b.Landmarks) {
				str(id)
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
