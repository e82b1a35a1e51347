package ingest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// BenchmarkIngest measures Ingest.Apply on batches of limits.batch_events fresh upserts
// into a store already holding n0 points, against the storage-only apply of the same
// messages in the same run (decode, PutPoint, SetOffset in one transaction, no features,
// no pool). Reported: events/s of the ingest and x_storage, the ingest's time per event
// over the storage-only time. With fsync=false both stores skip fsync, so the ratio
// compares CPU work; with fsync=true every commit is durable, as in production, and
// both pay one fsync per batch. The machine is shared, so the ratio is the number to
// read, not the absolute rate.
func BenchmarkIngest(b *testing.B) {
	for _, bc := range []struct {
		arch   string
		h, s   int
		m, n0  int
		dim    int
		labels string
		fsync  bool
	}{
		{"mlp:6-8-4", 2, 16, 8, 1000, 6, "tiny", false},
		{"mlp:6-8-4", 2, 16, 8, 1000, 6, "tiny", true},
		{"mlp:6-8-4", 2, 16, 8, 8000, 6, "tiny", false},
		{"mlp:64-128-10", 4, 512, 64, 1000, 64, "mlp64", false},
		// The daemon's default model and budget (random inputs of MNIST's shape).
		{"convnet:1x28x28-16-32-10", 4, 1024, 256, 2000, 784, "mnistnet", true},
	} {
		b.Run(fmt.Sprintf("%s/n0=%d/fsync=%v", bc.labels, bc.n0, bc.fsync), func(b *testing.B) {
			cfg := testConfig()
			cfg.Model.Arch = bc.arch
			cfg.Sketch = config.Sketch{H: bc.h, S: bc.s}
			cfg.Pool.M = bc.m
			cfg.Limits.MaxMessageBytes = 1 << 20
			batch := cfg.Limits.BatchEvents
			lim := stream.Limits{InputDim: bc.dim, MaxBytes: 1 << 20, MaxIDBytes: 32}
			r := rand.New(rand.NewPCG(1, 1))
			next := 0
			mkBatch := func(off int64) []stream.Message {
				ms := make([]stream.Message, batch)
				for i := range ms {
					x := make([]float64, bc.dim)
					for j := range x {
						x[j] = r.NormFloat64()
					}
					id := fmt.Sprintf("b%07d", next)
					next++
					v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
					if err != nil {
						b.Fatal(err)
					}
					ms[i] = stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: off + int64(i), Key: []byte(id), Value: v}
				}
				return ms
			}
			st := benchStore(b, bc.fsync)
			in, err := New(cfg, st, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			var off int64
			for off < int64(bc.n0) {
				if _, err := in.Apply(b.Context(), mkBatch(off)); err != nil {
					b.Fatal(err)
				}
				off += int64(batch)
			}
			if err := in.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
			batches := make([][]stream.Message, b.N)
			for i := range batches {
				batches[i] = mkBatch(off)
				off += int64(batch)
			}
			base := benchStore(b, bc.fsync)
			b.ResetTimer()
			t0 := time.Now()
			for _, ms := range batches {
				if _, err := in.Apply(b.Context(), ms); err != nil {
					b.Fatal(err)
				}
			}
			ingest := time.Since(t0)
			b.StopTimer()
			t0 = time.Now()
			for _, ms := range batches {
				if err := storageOnly(base, ms, lim); err != nil {
					b.Fatal(err)
				}
			}
			storage := time.Since(t0)
			events := float64(b.N * batch)
			b.ReportMetric(events/ingest.Seconds(), "events/s")
			b.ReportMetric(ingest.Seconds()/storage.Seconds(), "x_storage")
		})
	}
}

// storageOnly is the baseline: what applying the batch costs without features or pool.
func storageOnly(st *storage.Store, ms []stream.Message, lim stream.Limits) error {
	return st.Apply(func(tx *storage.Tx) error {
		for _, m := range ms {
			ev, err := stream.DecodeTrain(m.Value, lim)
			if err != nil {
				return err
			}
			if err := tx.PutPoint(storage.Point{ID: ev.ID, X: ev.X}); err != nil {
				return err
			}
			if err := tx.SetOffset(m.Topic, int32(m.Partition), m.Offset); err != nil {
				return err
			}
		}
		return nil
	})
}

func benchStore(b *testing.B, fsync bool) *storage.Store {
	st, err := storage.Open(filepath.Join(b.TempDir(), "cairn.db"), storage.Options{NoSync: !fsync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkPoolPersist measures what persisting the pool costs per applied batch with n
// points stored, before and after the per-point records left the blob, in the same run:
// after each real Ingest.Apply of a batch of limits.batch_events upserts (schema 3, timed
// as ms/apply), the batch's persistence is replayed into two stores holding the same
// points, alternately:
//
//   - v2 (before): PutPoint of the batch's upserts and PutPoolState of the schema 2 blob
//     (encodePoolV2: every point's record, sorted by id; O(n log n) time, O(n) bytes);
//   - v3 (after): PutPoint of the upserts, PutPoolState of the schema 3 core blob and
//     PutPoolPoint of each upsert's record (putRecord): O(batch + m q + m²).
//
// Reported per batch: B_v2 and B_v3, the bytes bbolt handed to write(2) for the commit
// (wchar of /proc/self/io: data pages, branch pages, freelist and meta page; 0 where the
// file is not available), B_base the same for a third store given only the points and
// the core blob (what a layout keeping the records inside the point values, such as
// storage.Point.Cert, would write per batch, and the floor of any layout), blob_v2 and blob_v3 (the pool blob alone), ms_v2 and ms_v3
// (encode plus commit, without fsync), and x_bytes and x_time, the v2/v3 ratios. The
// model is the small test model (q = 32, m = 8 per view) so that n, not the features,
// dominates. With the default m = 256 the core blob is ~2.1 MB (the factor and Gram
// matrix of both views, 32·m² bytes), which schema 2's records (about 2·(20 + id
// length) bytes per point) equal at n ≈ 37,000 for 8-byte ids: schema 3 removes the
// term that keeps growing. The machine is shared: read the ratios.
//
// Two workloads. append: fresh ids, increasing, as an initial load sends them (the
// store grows by a batch per iteration; n_end is the count at the end, so run few
// iterations). replace: upserts of distinct random stored ids (n fixed), the worst
// case for bbolt's page locality: each record lands on its own 4 KiB leaf page of the
// poolpoints bucket, as each point does in the points bucket, so B_v3 is bounded by
// about 2·batch pages whatever n, while B_v2 grows with n.
func BenchmarkPoolPersist(b *testing.B) {
	for _, bc := range []struct {
		n       int
		replace bool
	}{{2000, false}, {20000, false}, {2000, true}, {20000, true}} {
		n := bc.n
		b.Run(fmt.Sprintf("n=%d/replace=%v", n, bc.replace), func(b *testing.B) {
			cfg := testConfig()
			cfg.Limits.MaxMessageBytes = 1 << 20
			batch := cfg.Limits.BatchEvents
			lim := stream.Limits{InputDim: 6, MaxBytes: 1 << 20, MaxIDBytes: 32}
			r := rand.New(rand.NewPCG(3, 3))
			next := 0
			// mkBatch makes a batch of upserts: of new ids while filling the store, then
			// of new ids (append) or of distinct stored ids (replace, n fixed).
			mkBatch := func(off int64) ([]stream.Message, []storage.Point) {
				ms := make([]stream.Message, batch)
				pts := make([]storage.Point, batch)
				seen := map[int]bool{}
				for i := range ms {
					x := make([]float64, 6)
					for j := range x {
						x[j] = r.NormFloat64()
					}
					k := next
					if next < n || !bc.replace {
						next++
					} else {
						for k = r.IntN(n); seen[k]; k = r.IntN(n) {
						}
						seen[k] = true
					}
					id := fmt.Sprintf("b%07d", k)
					v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: x}, lim)
					if err != nil {
						b.Fatal(err)
					}
					ms[i] = stream.Message{Topic: cfg.Kafka.Topics.Train, Offset: off + int64(i), Key: []byte(id), Value: v}
					pts[i] = storage.Point{ID: id, X: x}
				}
				return ms, pts
			}
			st := benchStore(b, false)
			in, err := New(cfg, st, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			var off int64
			var all []storage.Point
			for next < n {
				ms, pts := mkBatch(off)
				if _, err := in.Apply(b.Context(), ms); err != nil {
					b.Fatal(err)
				}
				off += int64(batch)
				all = append(all, pts...)
			}
			if err := in.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
			fp := in.feat.Fingerprint()
			v2, v3, base := benchStore(b, false), benchStore(b, false), benchStore(b, false)
			for _, s := range []*storage.Store{v2, v3, base} {
				if err := s.Apply(func(tx *storage.Tx) error {
					for _, p := range all {
						if err := tx.PutPoint(p); err != nil {
							return err
						}
					}
					if s == v3 {
						return putAllRecords(tx, in.pool, in.cache.IDs())
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			type job struct {
				ms  []stream.Message
				pts []storage.Point
			}
			jobs := make([]job, b.N)
			for i := range jobs {
				jobs[i].ms, jobs[i].pts = mkBatch(off)
				off += int64(batch)
			}
			var apply, t2, t3 time.Duration
			var w2, w3, wb, blob2, blob3 int64
			b.ResetTimer()
			for _, j := range jobs {
				t0 := time.Now()
				if _, err := in.Apply(b.Context(), j.ms); err != nil {
					b.Fatal(err)
				}
				apply += time.Since(t0)

				c0, t0 := wchar(), time.Now()
				ps, err := encodePoolV2(fp, in.pool)
				if err != nil {
					b.Fatal(err)
				}
				if err := v2.Apply(func(tx *storage.Tx) error {
					for _, p := range j.pts {
						if err := tx.PutPoint(p); err != nil {
							return err
						}
					}
					return tx.PutPoolState(ps)
				}); err != nil {
					b.Fatal(err)
				}
				t2 += time.Since(t0)
				w2 += wchar() - c0
				blob2 += int64(len(ps.Data))

				c0, t0 = wchar(), time.Now()
				if ps, err = encodePool(fp, in.pool); err != nil {
					b.Fatal(err)
				}
				if err := v3.Apply(func(tx *storage.Tx) error {
					var rec []byte
					for _, p := range j.pts {
						if err := tx.PutPoint(p); err != nil {
							return err
						}
						var err error
						if rec, err = putRecord(tx, in.pool, rec, p.ID); err != nil {
							return err
						}
					}
					return tx.PutPoolState(ps)
				}); err != nil {
					b.Fatal(err)
				}
				t3 += time.Since(t0)
				w3 += wchar() - c0
				blob3 += int64(len(ps.Data))

				c0 = wchar()
				if err := base.Apply(func(tx *storage.Tx) error {
					for _, p := range j.pts {
						if err := tx.PutPoint(p); err != nil {
							return err
						}
					}
					return tx.PutPoolState(ps)
				}); err != nil {
					b.Fatal(err)
				}
				wb += wchar() - c0
			}
			b.StopTimer()
			nb := float64(b.N)
			b.ReportMetric(float64(in.Len()), "n_end")
			b.ReportMetric(float64(apply.Microseconds())/1e3/nb, "ms/apply")
			b.ReportMetric(float64(t2.Microseconds())/1e3/nb, "ms_v2")
			b.ReportMetric(float64(t3.Microseconds())/1e3/nb, "ms_v3")
			b.ReportMetric(t2.Seconds()/t3.Seconds(), "x_time")
			b.ReportMetric(float64(blob2)/nb, "blob_v2")
			b.ReportMetric(float64(blob3)/nb, "blob_v3")
			b.ReportMetric(float64(w2)/nb, "B_v2")
			b.ReportMetric(float64(w3)/nb, "B_v3")
			b.ReportMetric(float64(wb)/nb, "B_base")
			if w3 > 0 {
				b.ReportMetric(float64(w2)/float64(w3), "x_bytes")
			}
		})
	}
}

// wchar returns the bytes this process has passed to write-like system calls
// (/proc/self/io), or 0 where that file is not available.
func wchar() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
