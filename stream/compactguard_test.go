package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCompactGuard: a compaction interrupted after kfake removed a partition's files
// (simulated: the guard made, then the partition files deleted, as a kill -9 between
// kfake's Remove and its rewrite leaves them) restarts with every record, not an empty
// partition, and the compaction is finished at the restart (a superseded record is
// gone); a completed Compact leaves no guard; a leftover temporary guard is dropped.
// Without the restore the partition would restart empty.
func TestCompactGuard(t *testing.T) {
	const topic, n = "t.guard", 40
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic}, DataDir: dir,
		TopicConfigs: map[string]map[string]string{topic: {"cleanup.policy": "compact"}}}
	b, err := StartBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWriter(t, b.Addr(), nil)
	for i := range n {
		if err := w.Write(ctx, Message{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	// Two callers at once (the daemon's outbox erasure and its models publisher) must
	// not collide on the guard.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- b.Compact() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Compact: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, guardDir)); !os.IsNotExist(err) {
		t.Fatalf("a completed compaction left its guard: %v", err)
	}
	// A key written twice, then another record (compaction keeps a partition's last
	// batch whole): the restart's compaction must drop the older dup.
	for _, m := range []Message{{Key: []byte("dup"), Value: []byte("old")}, {Key: []byte("dup"), Value: []byte("new")},
		{Key: []byte("tail"), Value: []byte("v")}} {
		m.Topic = topic
		if err := w.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()

	if err := guardPartitions(dir); err != nil {
		t.Fatal(err)
	}
	removed := 0
	err = filepath.WalkDir(filepath.Join(dir, "partitions"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".dat") || strings.HasSuffix(p, ".idx")) {
			removed++
			return os.Remove(p)
		}
		return err
	})
	if err != nil || removed == 0 {
		t.Fatalf("simulating the interrupted rewrite: %d files removed, %v", removed, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, guardTmpDir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	b2, err := StartBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if !b2.RestoredCompaction() || b.RestoredCompaction() {
		t.Errorf("RestoredCompaction: %v after the interrupted compaction, %v on the first start; want true, false", b2.RestoredCompaction(), b.RestoredCompaction())
	}
	for _, g := range []string{guardDir, guardTmpDir} {
		if _, err := os.Stat(filepath.Join(dir, g)); !os.IsNotExist(err) {
			t.Errorf("%s left after the restart: %v", g, err)
		}
	}
	ends, err := EndOffsets(ctx, Config{Brokers: []string{b2.Addr()}}, topic)
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != n+3 {
		t.Fatalf("after the interrupted compaction the partition ends at %d, want %d", ends[0], n+3)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b2.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(n+2), 10*time.Second)
	if len(got) != n+2 {
		t.Fatalf("read %d records after the restore, want %d (the older dup compacted away)", len(got), n+2)
	}
	for _, m := range got {
		if string(m.Value) == "old" {
			t.Fatal("the restart did not finish the interrupted compaction: the superseded record is readable")
		}
	}
}
