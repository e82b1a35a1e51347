package daemon

import "github.com/cairnhq/cairn/storage"

// Storage format 3: the pending and poolpoints buckets.

func readEra(tx *storage.ReadTx, g *frozenGolden) error {
	if err := tx.ForEachPending(func(seq uint64, body []byte) error {
		g.Pending = append(g.Pending, frozenPending{seq, body})
		return nil
	}); err != nil {
		return err
	}
	return tx.ForEachPoolPoint(func(id string, rec []byte) error {
		g.PoolPoints = append(g.PoolPoints, frozenRecord{id, rec})
		return nil
	})
}
