package stream

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestCompactRewritesOnlyWhatItErases: after one key of a compacted topic is
// tombstoned, Compact rewrites only files of the partition that holds the key, and of
// them no more than about one segment (the one holding the key's record and the
// partition's active segment), although each partition holds several segments; the
// other partitions' files are not touched, and the key's value is in no file
// afterwards. Upstream kfake rewrote every partition of every compacted topic whole.
func TestCompactRewritesOnlyWhatItErases(t *testing.T) {
	const topic, parts, n, size = "t.erase", 4, 2400, 2048 // about 1.2 MB per partition
	seg, _ := strconv.Atoi(segmentBytes)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: parts, Topics: []string{topic}, DataDir: dir,
		TopicConfigs: map[string]map[string]string{topic: {"cleanup.policy": "compact"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := newTestWriter(t, b.Addr(), nil)
	value := func(i int) []byte {
		v := bytes.Repeat([]byte{'.'}, size)
		copy(v, fmt.Sprintf("<value-%06d>", i))
		return v
	}
	for lo := 0; lo < n; lo += 100 {
		var msgs []Message
		for i := lo; i < lo+100; i++ {
			msgs = append(msgs, Message{Topic: topic, Key: fmt.Appendf(nil, "k%06d", i), Value: value(i)})
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	// Compact once, so that what follows measures one erasure only.
	if err := b.Compact(); err != nil {
		t.Fatal(err)
	}
	before := partitionFiles(t, dir)
	segsPerPart := map[string]int{}
	for p := range before {
		segsPerPart[filepath.Dir(p)]++
	}
	for d, c := range segsPerPart {
		if c < 2*2 { // .dat and .idx of at least two segments
			t.Fatalf("%s holds %d files: the test needs partitions of several segments of %d bytes", d, c, seg)
		}
	}

	// The tombstone, then records behind it in every partition: compaction keeps a
	// partition's last batch whole, unread.
	const victim = n / 3
	if err := w.Write(ctx, Message{Topic: topic, Key: fmt.Appendf(nil, "k%06d", victim)}); err != nil {
		t.Fatal(err)
	}
	var tail []Message
	for i := range 4 * parts {
		tail = append(tail, Message{Topic: topic, Key: fmt.Appendf(nil, "tail%d", i), Value: []byte("v")})
	}
	if err := w.Write(ctx, tail...); err != nil {
		t.Fatal(err)
	}
	home := ""
	for p := range before {
		if raw, err := os.ReadFile(filepath.Join(dir, p)); err == nil && bytes.Contains(raw, value(victim)[:13]) {
			home = filepath.Dir(p)
		}
	}
	if home == "" {
		t.Fatal("the victim's value is in no partition file before the erasure")
	}
	if err := b.Compact(); err != nil {
		t.Fatal(err)
	}

	after := partitionFiles(t, dir)
	rewritten := int64(0)
	for p, fa := range after {
		if fb, ok := before[p]; ok && fb.ino == fa.ino && fb.size <= fa.size {
			continue // the same file, at most appended to (the tombstone)
		}
		if filepath.Dir(p) != home {
			t.Errorf("%s was rewritten, but the erased key lives in %s", p, home)
		}
		rewritten += fa.size
		raw, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, value(victim)[:13]) {
			t.Errorf("%s still holds the erased value", p)
		}
	}
	for p := range after {
		if raw, err := os.ReadFile(filepath.Join(dir, p)); err == nil && bytes.Contains(raw, value(victim)[:13]) {
			t.Errorf("%s still holds the erased value", p)
		}
	}
	// One segment may exceed segmentBytes by the batch that crossed it.
	if limit := int64(seg) + 100*size; rewritten > limit {
		t.Errorf("one erasure rewrote %d bytes of partition files, want at most %d (a segment of %d and a batch)", rewritten, limit, seg)
	}
	t.Logf("one erasure rewrote %d bytes in %s", rewritten, home)
}

type fileID struct {
	ino  uint64
	size int64
}

// partitionFiles are the broker's partition files under dir, by relative path.
func partitionFiles(t *testing.T, dir string) map[string]fileID {
	t.Helper()
	files := map[string]fileID{}
	err := filepath.WalkDir(filepath.Join(dir, "partitions"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			t.Skip("no inode numbers on this system")
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = fileID{ino: st.Ino, size: info.Size()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCompactSplitsLargeSegments: a segment written under a larger segment.bytes (a
// data directory from before the embedded broker lowered it) is split when an
// erasure rewrites it, so that the next erasure in it rewrites one small segment; the
// erased value is gone and every other record is still read.
func TestCompactSplitsLargeSegments(t *testing.T) {
	const topic, n, size = "t.split", 800, 2048 // about 1.6 MB in one partition
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic}, DataDir: dir,
		TopicConfigs: map[string]map[string]string{topic: {"cleanup.policy": "compact", "segment.bytes": "104857600"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := newTestWriter(t, b.Addr(), nil)
	for lo := 0; lo < n; lo += 100 {
		var msgs []Message
		for i := lo; i < lo+100; i++ {
			msgs = append(msgs, Message{Topic: topic, Key: fmt.Appendf(nil, "k%06d", i), Value: bytes.Repeat([]byte{'x'}, size)})
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	gone := []byte("<erased value>")
	if err := w.Write(ctx, Message{Topic: topic, Key: []byte("victim"), Value: gone}); err != nil {
		t.Fatal(err)
	}
	if err := setTopicConfigs(ctx, b.Addr(), map[string]map[string]string{topic: {"segment.bytes": segmentBytes}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, Message{Topic: topic, Key: []byte("victim")}, Message{Topic: topic, Key: []byte("tail"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, Message{Topic: topic, Key: []byte("tail2"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	dats := func() int {
		c := 0
		for p := range partitionFiles(t, dir) {
			if filepath.Ext(p) == ".dat" {
				c++
			}
		}
		return c
	}
	before := dats()
	if err := b.Compact(); err != nil {
		t.Fatal(err)
	}
	after := dats()
	for p := range partitionFiles(t, dir) {
		raw, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, gone) {
			t.Errorf("%s still holds the erased value", p)
		}
	}
	if after <= before {
		t.Errorf("the partition holds %d segment files after the erasure, %d before: want its large segment split in segments of %s bytes", after, before, segmentBytes)
	}
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	want := n + 3 // the points, the tombstone and the two tails (the victim's value compacted away)
	if got := runReader(t, r, newCollector(want), 10*time.Second); len(got) != want {
		t.Fatalf("read %d records after the split, want %d", len(got), want)
	}
}
