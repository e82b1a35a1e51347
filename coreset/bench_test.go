package coreset

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// Benchmark sizes: q = 256 features, m = 64 landmarks (a small version of h·s = 4·1024,
// m = 256; insert cost is O(m q + m²) either way).
const benchQ, benchM = 256, 64

var sinkCert ResidualCertificate

// benchPool returns a pool synced over n0 points, then grown without Sync to n points
// (inserts never read stored points, so staleness does not matter for their cost).
func benchPool(b *testing.B, n0, n int) (*Pool, MapSource) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	p, err := New(Config{Dim: benchQ, Budget: LandmarkBudget{M: benchM}, TopUp: true, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	src := MapSource{}
	base := make([][]float64, 512)
	for i := range base {
		base[i] = make([]float64, benchQ)
		for k := range base[i] {
			base[i][k] = r.NormFloat64()
		}
	}
	for i := 0; i < n; i++ {
		id := "s" + strconv.Itoa(i)
		f := base[i%len(base)]
		if i < n0 {
			src[id] = f
		}
		if err := p.Insert(id, f); err != nil {
			b.Fatal(err)
		}
		if i == n0-1 {
			if err := p.Sync(src); err != nil {
				b.Fatal(err)
			}
		}
	}
	return p, src
}

// timeInserts inserts k fresh points and returns the mean time per insert, then deletes
// them again (untimed) so the pool size is unchanged.
func timeInserts(p *Pool, feats [][]float64, ids []string) time.Duration {
	start := time.Now()
	for i, id := range ids {
		_ = p.Insert(id, feats[i%len(feats)])
	}
	el := time.Since(start)
	for _, id := range ids {
		_ = p.Delete(id)
	}
	return el / time.Duration(len(ids))
}

// BenchmarkPoolInsertRatio measures the insert cost with 10^3 and with 10^5 stored points
// in the same run and reports their ratio (target ≤ 1.5: per-event work must not grow with
// the number of stored points).
func BenchmarkPoolInsertRatio(b *testing.B) {
	small, _ := benchPool(b, 1000, 1000)
	large, _ := benchPool(b, 1000, 100000)
	r := rand.New(rand.NewPCG(3, 4))
	feats := make([][]float64, 64)
	for i := range feats {
		feats[i] = make([]float64, benchQ)
		for k := range feats[i] {
			feats[i][k] = r.NormFloat64()
		}
	}
	const k = 2000
	ids := make([]string, k)
	for i := range ids {
		ids[i] = "new" + strconv.Itoa(i)
	}
	var ts, tl time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// alternate to spread machine noise over both
		ts += timeInserts(small, feats, ids)
		tl += timeInserts(large, feats, ids)
	}
	b.StopTimer()
	sinkCert = large.Residual()
	b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "ns/insert@1e3")
	b.ReportMetric(float64(tl.Nanoseconds())/float64(b.N), "ns/insert@1e5")
	b.ReportMetric(float64(tl)/float64(ts), "ratio_1e5/1e3")
}

// BenchmarkLandmarkDeleteVsRebuild times deleting a mid-pool landmark (pivot deletion,
// O(m²)) against the rebuild it avoids (a full Sync over n = 10^4 points), on the same
// pool state, and reports the ratio.
func BenchmarkLandmarkDeleteVsRebuild(b *testing.B) {
	p, src := benchPool(b, 10000, 10000)
	st := p.State()
	victim := p.Landmarks()[benchM/2]
	delete(src, victim)
	var td, tr time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a, _ := Restore(st)
		b.StartTimer()
		t0 := time.Now()
		if err := a.Delete(victim); err != nil {
			b.Fatal(err)
		}
		td += time.Since(t0)
		t0 = time.Now()
		if err := a.Sync(src); err != nil {
			b.Fatal(err)
		}
		tr += time.Since(t0)
		sinkCert = a.Residual()
	}
	b.ReportMetric(float64(td.Nanoseconds())/float64(b.N), "ns/delete")
	b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N), "ns/rebuild")
	b.ReportMetric(float64(tr)/float64(td), "rebuild/delete")
}

// BenchmarkSync reports the Sync cost at n = 10^4 and its rate in multiply-adds of the
// dominant n·q·m term against a plain dot-product loop of the same length measured in
// the same run (ratio 1 would be "as fast as streaming the features m times").
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		b.Run(fmt.Sprintf("n%d", n), func(b *testing.B) {
			p, src := benchPool(b, n, n)
			st := p.State()
			st.Stale, st.StaleFrom = true, 0
			g := make([]float64, n*benchQ)
			i := 0
			for _, f := range src {
				copy(g[i*benchQ:], f)
				i++
			}
			var tsync, tdot time.Duration
			var s float64
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				a, _ := Restore(st)
				t0 := time.Now()
				if err := a.Sync(src); err != nil {
					b.Fatal(err)
				}
				tsync += time.Since(t0)
				t0 = time.Now()
				for t := 0; t < benchM; t++ {
					for j := 0; j < n; j++ {
						s += dot(g[j*benchQ:(j+1)*benchQ], g[(t%n)*benchQ:(t%n+1)*benchQ])
					}
				}
				tdot += time.Since(t0)
			}
			sinkCert.Trace = s
			b.ReportMetric(float64(tsync.Nanoseconds())/float64(b.N), "ns/sync")
			b.ReportMetric(float64(tsync)/float64(tdot), "sync/nqm-dots")
		})
	}
}
