package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/internal/lab/verify"
)

// certOut is the part of verify certificate's output the tests read.
type certOut struct {
	Queries             int       `json:"queries"`
	M                   int       `json:"m"`
	K                   int       `json:"k"`
	Issued              int       `json:"issued"`
	Incorrect           int       `json:"incorrect"`
	IncorrectRate       *float64  `json:"incorrect_rate"`
	Delta               *float64  `json:"delta"`
	CertifiedRate       *float64  `json:"certified_rate"`
	SketchTopKExactRate *float64  `json:"sketch_topk_exact_rate"`
	MeanTopKOverlap     *float64  `json:"mean_topk_overlap"`
	OmegaSource         string    `json:"omega_source"`
	OmegaFit            string    `json:"omega_fit"`
	OmegaRatio          float64   `json:"omega_ratio"`
	Omega               []float64 `json:"omega"`
	OmegaSpread         float64   `json:"omega_spread"`
}

func runCertificate(t *testing.T, args ...string) certOut {
	t.Helper()
	code, stdout, stderr := runCmd(append([]string{"verify", "certificate"}, args...)...)
	if code != 0 {
		t.Fatalf("verify certificate %v: exit %d: %s", args, code, stderr)
	}
	var r certOut
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.IncorrectRate == nil || r.Delta == nil || r.CertifiedRate == nil || r.SketchTopKExactRate == nil || r.MeanTopKOverlap == nil {
		t.Fatalf("output lacks a key of incorrect_rate, delta, certified_rate, sketch_topk_exact_rate, mean_topk_overlap: %s", stdout)
	}
	// Consistency of the counts: a correct certificate's top-K is the sketched top-K
	// (both rank the same Î) and equals the exact one, so correct certificates are at
	// most the queries whose sketched top-K is exact; equal sets overlap fully.
	q := float64(r.Queries)
	if correct := float64(r.Issued - r.Incorrect); correct > *r.SketchTopKExactRate*q+1e-9 {
		t.Errorf("%d correct certificates, but the sketched top-K is exact in only %v of %d queries", r.Issued-r.Incorrect, *r.SketchTopKExactRate, r.Queries)
	}
	if !(*r.MeanTopKOverlap >= *r.SketchTopKExactRate && *r.MeanTopKOverlap <= 1) {
		t.Errorf("mean_topk_overlap %v, sketch_topk_exact_rate %v: want rate ≤ overlap ≤ 1", *r.MeanTopKOverlap, *r.SketchTopKExactRate)
	}
	if *r.CertifiedRate != float64(r.Issued)/q {
		t.Errorf("certified_rate %v, issued %d of %d", *r.CertifiedRate, r.Issued, r.Queries)
	}
	if len(r.Omega) != r.M {
		t.Errorf("%d ω values for m = %d", len(r.Omega), r.M)
	}
	return r
}

// small is a quick verify certificate setting: 30 queries on a 6-landmark pool.
var small = []string{"--queries", "30", "--m", "6", "--k", "2", "--h", "8", "--s", "64", "--seed", "1"}

// TestVerifyCertificateHalving keeps the former default under --omega halving: ω =
// ratio^{-rank}·U(0.9, 1.1), so max/min is within ratio^{m-1}·[0.9/1.1, 1.1/0.9].
func TestVerifyCertificateHalving(t *testing.T) {
	// 256 heads without SRHT: radii small enough for certificates on 30 queries.
	args := []string{"--queries", "30", "--m", "6", "--k", "2", "--h", "256", "--s", "0", "--seed", "1"}
	r := runCertificate(t, append(args, "--omega", "halving", "--omega-ratio", "3")...)
	lo, hi := math.Pow(3, 5)*0.9/1.1, math.Pow(3, 5)*1.1/0.9
	if r.OmegaSource != "halving" || r.OmegaRatio != 3 || r.OmegaSpread < lo || r.OmegaSpread > hi {
		t.Errorf("omega_source %q ratio %v spread %v, want halving, 3, spread in [%v, %v]", r.OmegaSource, r.OmegaRatio, r.OmegaSpread, lo, hi)
	}
	// A halving ω separates the scores: with this budget some queries get a certificate
	// (5 of 30 when written), which runCertificate's count check then covers.
	if r.Issued == 0 {
		t.Errorf("no certificate issued with a halving ω")
	}
}

// TestVerifyCertificateRealOmega checks that the default ω is the fitted model's: the
// same values `cairnctl fit` reports for the same data, rows, landmarks per view and
// seed (omega.mean of one fit, times kernel_scale for raw kernel units). Both run the
// same deterministic fit, so they agree to the last bit; 1e-12 relative only allows for
// a change in how the fit's work is spread over cores.
func TestVerifyCertificateRealOmega(t *testing.T) {
	if _, err := dataset.Open("mnist", "train", 1); err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	r := runCertificate(t, append(slices.Clone(small), "--omega-n", "300")...)
	if r.OmegaSource != "real" || !strings.Contains(r.OmegaFit, "--data mnist --n 300 --m 3 --seed 1") {
		t.Errorf("omega_source %q, omega_fit %q: want real, from mnist with 300 rows and 3 landmarks per view", r.OmegaSource, r.OmegaFit)
	}
	code, stdout, stderr := runCmd("fit", "--data", "mnist", "--n", "300", "--m", "3", "--seed", "1", "--test-n", "0", "--probe=false")
	if code != 0 {
		t.Fatalf("fit: %s", stderr)
	}
	var f struct {
		KernelScale float64 `json:"kernel_scale"`
		Omega       struct {
			Mean []float64 `json:"mean"`
		} `json:"omega"`
	}
	if err := json.Unmarshal([]byte(stdout), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Omega.Mean) != len(r.Omega) {
		t.Fatalf("fit has %d ω, verify used %d", len(f.Omega.Mean), len(r.Omega))
	}
	for l, w := range f.Omega.Mean {
		if want := w * f.KernelScale; math.Abs(r.Omega[l]-want) > 1e-12*want {
			t.Errorf("ω[%d] = %v, the fit says %v", l, r.Omega[l], want)
		}
	}
}

// TestVerifyCertificateOmegaFile reads ω from the file formats verify certificate takes,
// and refuses files it cannot use.
func TestVerifyCertificateOmegaFile(t *testing.T) {
	dir := t.TempDir()
	want := []float64{4, 3, 2.5, 2, 1, 0.5}
	files := map[string]string{
		"array.json":  "[4, 3, 2.5, 2, 1, 0.5, 0.25]",
		"export.json": `{"model": 1, "landmarks": [{"id":"a","omega":4},{"id":"b","omega":3},{"id":"c","omega":2.5},{"id":"d","omega":2},{"id":"e","omega":1},{"id":"f","omega":0.5}]}`,
		"fit.json":    `{"omega": {"mean": [4, 3, 2.5, 2, 1, 0.5]}}`,
		"plain.txt":   "4 3\n2.5, 2\n1\n0.5\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCertificate(t, append(slices.Clone(small), "--omega", path)...)
		if !slices.Equal(r.Omega, want) || r.OmegaSource != "file:"+path || r.OmegaSpread != 8 {
			t.Errorf("%s: ω %v source %q spread %v, want %v from the file, spread 8", name, r.Omega, r.OmegaSource, r.OmegaSpread, want)
		}
	}
	for name, body := range map[string]string{
		"short.json": "[1, 2, 3]",
		"neg.txt":    "1 2 3 -4 5 6",
		"zero.json":  "[1, 2, 3, 0, 5, 6]",
		"word.txt":   "1 2 three 4 5 6",
		"empty.json": `{"model": 1}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runCmd(append([]string{"verify", "certificate", "--omega", path}, small...)...); code == 0 || !strings.Contains(stderr, "--omega") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming --omega", name, code, stderr)
		}
	}
}

// TestVerifyCertificateTopKRates recomputes sketch_topk_exact_rate and mean_topk_overlap
// with a slow reference: the same seeded landmarks, queries and evaluation sketches
// (named as the command names them), the exact kernel from full Jacobians
// (entk.ExactKernel, not the two-axis terms the command uses), the sketched kernel from
// per-point features, and top-K sets by sorting. ω is nearly flat, as fitted ω are, so
// that the sketch gets some top-K sets wrong. The rates are counts over 40 queries, so
// they must agree exactly unless an exact score pair ties to rounding (probability ~0).
func TestVerifyCertificateTopKRates(t *testing.T) {
	const arch, queries, m, k, h, s, seed = "mlp:8-32-16", 40, 6, 2, 4, 32, 3
	omega := []float64{1, 1.01, 0.99, 1.02, 0.98, 1.03}
	path := filepath.Join(t.TempDir(), "omega.json")
	raw, _ := json.Marshal(omega)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCertificate(t, "--arch", arch, "--queries", strconv.Itoa(queries), "--m", strconv.Itoa(m), "--k", strconv.Itoa(k),
		"--h", strconv.Itoa(h), "--s", strconv.Itoa(s), "--seed", strconv.Itoa(seed), "--omega", path)

	b, err := entk.NewBackbone(arch, seed)
	if err != nil {
		t.Fatal(err)
	}
	in := b.InDim()
	lx := verify.GaussianInputs(seed, "cairnctl/verify/certificate/landmarks", m, in)
	qx := verify.GaussianInputs(seed, "cairnctl/verify/certificate/queries", queries, in)
	ws := b.NewWorkspace()
	topSet := func(scores []float64) map[int]bool {
		idx := []int{0, 1, 2, 3, 4, 5}
		sort.Slice(idx, func(i, j int) bool { return scores[idx[i]] > scores[idx[j]] })
		out := map[int]bool{}
		for _, i := range idx[:k] {
			out[i] = true
		}
		return out
	}
	equal, overlap := 0, 0
	for q := range queries {
		x := qx[q*in : (q+1)*in]
		sk, err := entk.NewSketch(b, h, s, seed, rng.Sub("cairnctl/verify/certificate/eval", q))
		if err != nil {
			t.Fatal(err)
		}
		skw := sk.NewWorkspace()
		fq, fl := make([]float64, sk.Dim()), make([]float64, sk.Dim())
		sk.FeaturesTo(fq, x, skw)
		ex, sc := make([]float64, m), make([]float64, m)
		for l := range m {
			xl := lx[l*in : (l+1)*in]
			ex[l] = entk.ExactKernel(b, xl, x, ws) * omega[l]
			sk.FeaturesTo(fl, xl, skw)
			var dot float64
			for j := range fl {
				dot += fl[j] * fq[j]
			}
			sc[l] = dot * omega[l]
		}
		want, got := topSet(ex), topSet(sc)
		n := 0
		for i := range got {
			if want[i] {
				n++
			}
		}
		overlap += n
		if n == k {
			equal++
		}
	}
	if wantRate := float64(equal) / queries; *r.SketchTopKExactRate != wantRate {
		t.Errorf("sketch_topk_exact_rate %v, reference %v", *r.SketchTopKExactRate, wantRate)
	}
	if wantOv := float64(overlap) / (queries * k); math.Abs(*r.MeanTopKOverlap-wantOv) > 1e-12 {
		t.Errorf("mean_topk_overlap %v, reference %v", *r.MeanTopKOverlap, wantOv)
	}
	if equal == queries {
		t.Errorf("the sketch got every top-K right: the test cannot tell the rates from 1; lower h or s")
	}
	t.Logf("reference: top-K exact in %d of %d queries, overlap %d of %d", equal, queries, overlap, queries*k)
}
