package daemon

import "github.com/cairnhq/cairn/storage"

// Storage format 2: the pending bucket, no poolpoints bucket.

func readEra(tx *storage.ReadTx, g *frozenGolden) error {
	return tx.ForEachPending(func(seq uint64, body []byte) error {
		g.Pending = append(g.Pending, frozenPending{seq, body})
		return nil
	})
}
