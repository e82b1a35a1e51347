package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// offline builds a daemon on dir with its store, signer and ingest, without Run.
func offline(t *testing.T, dir string, leading bool) *Daemon {
	t.Helper()
	d, err := New(e2eConfig(dir), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.store, err = d.openState(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.store.Close() })
	if err := d.loadSigner(); err != nil {
		t.Fatal(err)
	}
	if err := d.restore(); err != nil {
		t.Fatal(err)
	}
	d.leading.Store(leading)
	return d
}

// TestAdoptCandidates: a standby offered several records for the next seq (forged ones
// first) adopts the one that extends its chain, the leader's, and drops the others;
// the deletion it reports leaves the standby's pending list (the daemon's chain and
// ingest under internal/role/standby's adopter).
func TestAdoptCandidates(t *testing.T) {
	dirL, dirS := t.TempDir(), t.TempDir()
	leader := offline(t, dirL, true)
	b, err := os.ReadFile(filepath.Join(dirL, AuditKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirS, AuditKeyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	standby := offline(t, dirS, false)
	tp := leader.cfg.Kafka.Topics
	del := deleteMsg(t, tp.Train, "never-stored", "req-1")
	del.Partition, del.Offset = 0, 0
	ctx := context.Background()
	for _, d := range []*Daemon{leader, standby} {
		if _, err := d.train.ingest.Apply(ctx, []stream.Message{del}); err != nil {
			t.Fatal(err)
		}
	}
	if n := standby.train.ingest.PendingCount(); n != 1 {
		t.Fatalf("standby: %d pending deletions, want the unknown id's deletion left to the leader", n)
	}
	var genuine stream.Audit
	pend, err := leader.store.Pending(100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pend {
		if e.Topic == tp.Audits {
			if err := json.Unmarshal(e.Value, &genuine); err != nil {
				t.Fatal(err)
			}
		}
	}
	if genuine.Seq != 1 {
		t.Fatalf("the leader's audit: %+v", genuine)
	}
	badBody := genuine
	badBody.Body = "{"
	diverging := genuine
	diverging.Body = strings.Replace(genuine.Body, `"req-1"`, `"req-x"`, 1)
	diverging.KeyID = "someone-else"
	badSig := genuine
	badSig.Sig = hex.EncodeToString(make([]byte, 64))
	var offered []stream.Message
	for i, a := range []stream.Audit{badBody, diverging, badSig, genuine} {
		v, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		offered = append(offered, stream.Message{Topic: tp.Audits, Offset: int64(i), Value: v})
	}
	if err := standby.newAdopter().Handle(ctx, offered); err != nil {
		t.Fatal(err)
	}
	var head storage.AuditLink
	if err := standby.store.View(func(tx *storage.ReadTx) error {
		var err error
		head, _, err = tx.AuditHead()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(head.Hash[:]) != genuine.Hash || head.Seq != 1 {
		t.Fatalf("standby chain head %d %x; want the leader's record %s", head.Seq, head.Hash, genuine.Hash)
	}
	if n := standby.train.ingest.PendingCount(); n != 0 {
		t.Fatalf("standby: %d pending deletions after adopting their audit", n)
	}
}
