package storage_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cairnhq/cairn/storage"
)

// One input batch: the state change, the consumed offset and the output event
// are committed together, then a publisher drains the outbox.
func Example() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := storage.Open(filepath.Join(dir, "cairn.db"), storage.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	err = s.Apply(func(tx *storage.Tx) error {
		if err := tx.PutPoint(storage.Point{ID: "u1", X: []float64{0.5, 1.5}, HasLabel: true, Label: 3}); err != nil {
			return err
		}
		if err := tx.SetOffset("cairn.train", 0, 41); err != nil {
			return err
		}
		_, err := tx.Enqueue("cairn.status", []byte("ingest"), []byte(`{"v":1,"points":1}`))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// Publisher side: send, then acknowledge.
	pending, err := s.Pending(100)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range pending {
		fmt.Printf("send seq=%d topic=%s key=%s value=%s\n", e.Seq, e.Topic, e.Key, e.Value)
		if err := s.Ack(e.Seq); err != nil {
			log.Fatal(err)
		}
	}
	offs, _ := s.Offsets()
	fmt.Printf("resume %s/%d at %d\n", offs[0].Topic, offs[0].Partition, offs[0].Offset+1)
	// Output:
	// send seq=1 topic=cairn.status key=ingest value={"v":1,"points":1}
	// resume cairn.train/0 at 42
}

// A deletion: the audit's chain link goes into the emitted event, and the event
// is published only once the point's input is erased from its slot.
func Example_deletion() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := storage.Open(filepath.Join(dir, "cairn.db"), storage.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Apply(func(tx *storage.Tx) error { return tx.PutPoint(storage.Point{ID: "u1", X: []float64{7}}) })

	err = s.Apply(func(tx *storage.Tx) error {
		if _, err := tx.DeletePoint("u1"); err != nil {
			return err
		}
		body := []byte(`{"id":"u1","request":"r9"}`) // canonical bytes, made by the caller
		l, err := tx.AppendAudit(body)
		if err != nil {
			return err
		}
		event := fmt.Sprintf(`{"v":1,"seq":%d,"prev_hash":"%x","hash":"%x","body":%s}`, l.Seq, l.PrevHash[:4], l.Hash[:4], body)
		_, err = tx.Enqueue("cairn.audits", []byte("r9"), []byte(event))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// The input was erased from its slot before Apply returned, so the audit is
	// publishable at once.
	pending, _ := s.Pending(0)
	fmt.Println("pending:", len(pending), "seq", pending[0].Seq)
	fmt.Println("chain:", s.VerifyAudit())
	// Output:
	// pending: 1 seq 1
	// chain: <nil>
}
