package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkApply commits transactions of 256 events with 1 KiB payloads, fsync
// on, and compares with a raw bbolt Put loop of the same number of values of
// the same payload size in the same run (same file options, one transaction
// per 256 values). The ratio raw_time/store_time (1 = no overhead) is the
// number to read; absolute rates on a shared machine are noisy.
//
// The nosync variants (Options.NoSync) show the CPU cost of encoding and
// checksums without the fsync that dominates the fsync variants.
//
// Cases: "points" is an ingest batch (PutPoint of a 128-float vector per
// event, one SetOffset per batch); "outbox" enqueues 256 output events of 1 KiB.
func BenchmarkApply(b *testing.B) {
	const events = 256
	const floats = 128 // 1 KiB of float64
	x := make([]float64, floats)
	for i := range x {
		x[i] = math.Sqrt(float64(i))
	}
	payload := make([]byte, 8*floats)
	for i := range x {
		binary.LittleEndian.PutUint64(payload[8*i:], math.Float64bits(x[i]))
	}
	cases := []struct {
		name  string
		apply func(tx *Tx, batch, i int) error
	}{
		{"points", func(tx *Tx, batch, i int) error {
			if err := tx.PutPoint(Point{ID: pointID(batch, i), X: x}); err != nil {
				return err
			}
			if i != events-1 {
				return nil
			}
			// The daemon stores one offset per partition per batch.
			return tx.SetOffset("cairn.train", 0, int64(batch*events+i))
		}},
		{"outbox", func(tx *Tx, batch, i int) error {
			_, err := tx.Enqueue("cairn.attributions", []byte(pointID(batch, i)), payload)
			return err
		}},
	}
	for _, tc := range cases {
		for _, noSync := range []bool{false, true} {
			name := tc.name + "/fsync"
			if noSync {
				name = tc.name + "/nosync"
			}
			b.Run(name, func(b *testing.B) {
				dir := b.TempDir()
				opts := Options{NoSync: noSync}
				s, err := Open(filepath.Join(dir, "store.db"), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				raw := openRaw(b, filepath.Join(dir, "raw.db"), opts)
				defer raw.Close()
				b.SetBytes(events * int64(len(payload)))
				// Store and raw transactions alternate, so load changes on the
				// shared machine hit both sides alike.
				var storeDur, rawDur time.Duration
				storeTx := func(n int) time.Duration {
					t0 := time.Now()
					err := s.Apply(func(tx *Tx) error {
						for i := range events {
							if err := tc.apply(tx, n, i); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					return time.Since(t0)
				}
				rawTx := func(n int) time.Duration {
					b.StopTimer() // ns/op and MB/s measure the store alone
					defer b.StartTimer()
					t0 := time.Now()
					if err := rawPutTx(raw, n, events, payload); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0)
				}
				// The order flips every iteration so that neither side always
				// pays for the other's garbage or dirty page cache.
				for n := range b.N {
					if n%2 == 0 {
						storeDur += storeTx(n)
						rawDur += rawTx(n)
					} else {
						rawDur += rawTx(n)
						storeDur += storeTx(n)
					}
				}
				b.ReportMetric(float64(b.N*events)/storeDur.Seconds(), "events/s")
				b.ReportMetric(float64(b.N*events)/rawDur.Seconds(), "raw-events/s")
				b.ReportMetric(rawDur.Seconds()/storeDur.Seconds(), "x-raw-speed")
			})
		}
	}
}

func pointID(batch, i int) string { return fmt.Sprintf("pt-%08d-%03d", batch, i) }

func openRaw(b *testing.B, path string, opts Options) *bolt.DB {
	db, err := bolt.Open(path, 0o600, opts.withDefaults().bolt())
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		b.Fatal(err)
	}
	return db
}

// rawPutTx commits one transaction of events bbolt Puts of payload (fsync on).
func rawPutTx(db *bolt.DB, n, events int, payload []byte) error {
	return db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("b"))
		for i := range events {
			if err := bk.Put([]byte(pointID(n, i)), payload); err != nil {
				return err
			}
		}
		return nil
	})
}

// procWchar is the bytes this process has passed to write(2) and friends so far
// (/proc/self/io wchar): bbolt's page writes and the slots' contents and zeros.
func procWchar(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	b.Skip("no wchar in /proc/self/io")
	return 0
}

// BenchmarkDeletionBytes measures one deletion of a stored point (784 inputs, an MNIST
// image) from stores of n = 2,000, 20,000 and 60,000 points: the bytes it writes and its time,
// with fsync on. A deletion zeroes one slot and commits a few pages, so its bytes must
// not grow with n; format 3 rewrote the whole file (145 MB per deletion at 85 MB, as
// measured for #16). Reported next to the file size, measured in the same run.
func BenchmarkDeletionBytes(b *testing.B) {
	for _, n := range []int{2000, 20000, 60000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "cairn.db")
			s, err := Open(path, Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			x := make([]float64, 784)
			for i := range x {
				x[i] = float64(i) / 784
			}
			for lo := 0; lo < n; lo += 1000 {
				if err := s.Apply(func(tx *Tx) error {
					for i := lo; i < min(lo+1000, n); i++ {
						if err := tx.PutPoint(Point{ID: fmt.Sprintf("p%06d", i), X: x}); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
			if s, err = Open(path, Options{}); err != nil { // fsync on, as the daemon runs
				b.Fatal(err)
			}
			fi, _ := os.Stat(path)
			next := 0
			var written int64
			b.ResetTimer()
			for b.Loop() {
				before := procWchar(b)
				id := fmt.Sprintf("p%06d", next)
				next++
				if err := s.Apply(func(tx *Tx) error { _, err := tx.DeletePoint(id); return err }); err != nil {
					b.Fatal(err)
				}
				written += procWchar(b) - before
			}
			b.ReportMetric(float64(written)/float64(b.N), "bytes/deletion")
			b.ReportMetric(float64(fi.Size()), "file_bytes")
		})
	}
}
