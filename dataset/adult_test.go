package dataset

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// outsideAdultEnv names the variable that points at another copy of UCI Adult (a
// directory with adult.data and adult.test, as UCI serves them); TestAdultSources
// compares the shipped copy with it when it is set.
const outsideAdultEnv = "CAIRN_ADULT_DIR"

// shippedAdult returns the uncompressed bytes of a shipped file (adult.data or
// adult.test), read from the embedded copy.
func shippedAdult(t *testing.T, name string) []byte {
	t.Helper()
	f, err := adultFiles.Open("adult/" + name + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShippedAdult: the embedded files are the UCI files that adult/ATTRIBUTION.md
// names, by SHA-256 of their uncompressed bytes (the hashes of the UCI original
// adult.data and of adult.test minus its first line).
func TestShippedAdult(t *testing.T) {
	want := map[string]string{
		"adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
		"adult.test": "5c8e678e04c82a07182bbcb6667c9a06faaba123a55b409af7c5d21fb45784b3",
	}
	for name, sum := range want {
		h := sha256.Sum256(shippedAdult(t, name))
		if got := hex.EncodeToString(h[:]); got != sum {
			t.Errorf("%s: SHA-256 %s, want %s", name, got, sum)
		}
	}
}

// TestAdultSources: the spec "adult" (the embedded copy), "adult:DIR" on the same
// files uncompressed, "adult:DIR" on their .gz forms (as in a checkout's dataset/adult)
// and, when it is there, the outside copy give equal Sets, ids included.
func TestAdultSources(t *testing.T) {
	plain, gz := t.TempDir(), t.TempDir()
	for _, name := range []string{"adult.data", "adult.test"} {
		if err := os.WriteFile(filepath.Join(plain, name), shippedAdult(t, name), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := adultFiles.ReadFile("adult/" + name + ".gz")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(gz, name+".gz"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specs := []string{"adult:" + plain, "adult:" + gz, "adult:adult"}
	if dir := os.Getenv(outsideAdultEnv); dir != "" {
		specs = append(specs, "adult:"+dir)
	} else {
		t.Logf("$%s is not set: the shipped copy was compared with itself only (TestShippedAdult checks its hashes)", outsideAdultEnv)
	}
	for _, split := range []string{"train", "test"} {
		want, err := Open("adult", split, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range specs {
			got, err := Open(spec, split, 0)
			if err != nil {
				t.Fatalf("%s %s: %v", spec, split, err)
			}
			if got.N != want.N || got.D != want.D || !slices.Equal(got.X, want.X) ||
				!slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.IDs, want.IDs) || got.Name != want.Name {
				t.Errorf("%s %s: N %d D %d name %q differs from the shipped copy's (N %d D %d)", spec, split, got.N, got.D, got.Name, want.N, want.D)
			}
		}
	}
	// A directory with neither form of a file is ErrNotFound, naming the file.
	empty := t.TempDir()
	if _, err := Open("adult:"+empty, "train", 0); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "adult.data") {
		t.Errorf("empty directory: got %v, want ErrNotFound naming adult.data", err)
	}
	// A .gz that is not gzip is ErrFormat.
	if err := os.WriteFile(filepath.Join(empty, "adult.data.gz"), []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("adult:"+empty, "train", 0); !errors.Is(err, ErrFormat) {
		t.Errorf("bad gzip: got %v, want ErrFormat", err)
	}
}

// adultBlocks is the expected layout, counted independently with
// `cut -d, -fK adult.data | sort -u | wc -l` per column: width 1 for numeric columns,
// number of distinct train values ("?" included) for categorical ones.
var adultBlocks = []struct {
	name  string
	width int
	num   bool
}{
	{"age", 1, true}, {"workclass", 9, false}, {"fnlwgt", 1, true}, {"education", 16, false},
	{"education-num", 1, true}, {"marital-status", 7, false}, {"occupation", 15, false},
	{"relationship", 6, false}, {"race", 5, false}, {"sex", 2, false},
	{"capital-gain", 1, true}, {"capital-loss", 1, true}, {"hours-per-week", 1, true},
	{"native-country", 42, false},
}

func TestOpenAdult(t *testing.T) {
	spec := "adult"
	train, err := Open(spec, "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	test, err := Open(spec, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Record counts from adult/ATTRIBUTION.md, positives from `zcat adult/adult.data.gz | grep -c ">50K"`.
	for _, c := range []struct {
		s          *Set
		n, pos     int
		firstLabel int
	}{{train, 32561, 7841, 0}, {test, 16281, 3846, 0}} {
		pos := 0
		for _, l := range c.s.Labels {
			pos += l
		}
		if c.s.N != c.n || c.s.D != 108 || c.s.Classes != 2 || pos != c.pos || c.s.IsImage() {
			t.Errorf("got N %d D %d classes %d positives %d, want %d 108 2 %d", c.s.N, c.s.D, c.s.Classes, pos, c.n, c.pos)
		}
	}
	// One-hot blocks: each row has exactly one 1 per categorical block on both splits
	// (no test category is unseen in train), so a row's one-hot sum is 8.
	for _, s := range []*Set{train, test} {
		for i := range s.N {
			row, k := s.Row(i), 0
			for _, b := range adultBlocks {
				if !b.num {
					ones := 0
					for _, v := range row[k : k+b.width] {
						if v != 0 && v != 1 {
							t.Fatalf("row %d block %s: value %v", i, b.name, v)
						}
						if v == 1 {
							ones++
						}
					}
					if ones != 1 {
						t.Fatalf("%s row %d block %s: %d ones, want 1", s.IDs[i], i, b.name, ones)
					}
				}
				k += b.width
			}
		}
	}
	// Numeric columns standardized with train statistics: mean 0 and std 1 on train up
	// to rounding (1e-9), and the test value of row 0 equals (raw − train mean)/train std
	// computed here from the raw file by a separate, plain parser.
	raw := rawAdultColumn(t, shippedAdult(t, "adult.data"), 0)
	var m, ss float64
	for _, v := range raw {
		m += v
	}
	m /= float64(len(raw))
	for _, v := range raw {
		ss += (v - m) * (v - m)
	}
	sd := math.Sqrt(ss / float64(len(raw)))
	if got, want := test.Row(0)[0], (25-m)/sd; math.Abs(got-want) > 1e-12 {
		t.Errorf("test row 0 age: got %v, want %v", got, want)
	}
	k := 0
	for _, b := range adultBlocks {
		if b.num {
			var mean, sq float64
			for i := range train.N {
				v := train.Row(i)[k]
				mean += v
				sq += v * v
			}
			mean /= float64(train.N)
			std := math.Sqrt(sq/float64(train.N) - mean*mean)
			if math.Abs(mean) > 1e-9 || math.Abs(std-1) > 1e-9 {
				t.Errorf("train %s: mean %v std %v, want 0 and 1", b.name, mean, std)
			}
		}
		k += b.width
	}
	if train.IDs[5] != "adult/train/000005" || test.IDs[0] != "adult/test/000000" {
		t.Errorf("ids: got %q %q", train.IDs[5], test.IDs[0])
	}
	small, err := Open(spec, "test", 10)
	if err != nil {
		t.Fatal(err)
	}
	for j, v := range small.Row(9) {
		if v != test.Row(9)[j] {
			t.Fatalf("n=10 changes the encoding: feature %d %v vs %v", j, v, test.Row(9)[j])
		}
	}
}

// rawAdultColumn parses column col of an Adult file's bytes b on its own, plainly.
func rawAdultColumn(t *testing.T, b []byte, col int) []float64 {
	var out []float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 15 {
			continue
		}
		v, err := strconv.ParseFloat(f[col], 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// adultLine builds a record with the given age, workclass, native country and label.
func adultLine(age, work, country, label string) string {
	return age + ", " + work + ", 100, Bachelors, 13, Never-married, Sales, Unmarried, White, Male, 0, 0, 40, " + country + ", " + label
}

func TestAdultHandBuilt(t *testing.T) {
	dir := t.TempDir()
	data := strings.Join([]string{
		adultLine("20", "Private", "Peru", ">50K"),
		adultLine("40", "?", "?", "<=50K"),
		"",
	}, "\n")
	testf := strings.Join([]string{
		"|1x3 Cross validator",
		adultLine("30", "Private", "Peru", ">50K."),
		adultLine("30", "Never-worked", "Peru", "<=50K."),
	}, "\n")
	// Vary the numeric columns of the train file (a constant one is rejected: std 0).
	data = strings.Replace(data, "0, 0, 40", "1, 2, 41", 1)
	data = strings.Replace(data, ", 100,", ", 300,", 1)
	data = strings.Replace(data, ", 13,", ", 9,", 1)
	os.WriteFile(filepath.Join(dir, "adult.data"), []byte(data), 0o644)
	os.WriteFile(filepath.Join(dir, "adult.test"), []byte(testf), 0o644)
	if _, err := Open("adult:"+dir, "train", 0); err != nil {
		t.Fatalf("hand-built train: %v", err)
	}
	s, err := Open("adult:"+dir, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Layout: age | workclass{?,Private} | fnlwgt | education{Bachelors} | edu-num |
	// marital{1} | occupation{1} | relationship{1} | race{1} | sex{1} | gain | loss |
	// hours | country{?,Peru}: D = 6 + 2+1+1+1+1+1+1+2 = 16.
	if s.D != 16 || s.N != 2 || s.Labels[0] != 1 || s.Labels[1] != 0 {
		t.Fatalf("got D %d N %d labels %v, want 16 2 [1 0]", s.D, s.N, s.Labels)
	}
	// age: train 20, 40 → mean 30, std 10; test age 30 → 0.
	if got := s.Row(0)[0]; got != 0 {
		t.Errorf("age: got %v, want 0", got)
	}
	if got := s.Row(0)[1:3]; got[0] != 0 || got[1] != 1 {
		t.Errorf("workclass Private: got %v, want [0 1]", got)
	}
	if got := s.Row(1)[1:3]; got[0] != 0 || got[1] != 0 {
		t.Errorf("unseen workclass: got %v, want all-zero block", got)
	}
	if got := s.Row(0)[14:16]; got[0] != 0 || got[1] != 1 {
		t.Errorf("country Peru: got %v, want [0 1]", got)
	}
}

func TestAdultBadLines(t *testing.T) {
	cases := []struct {
		name string
		line string
		want error
	}{
		{"fields", "1, 2, 3", ErrFormat},
		{"label", adultLine("20", "Private", "Peru", "rich"), ErrFormat},
		{"age", adultLine("old", "Private", "Peru", ">50K"), ErrFormat},
		{"age-missing", adultLine("?", "Private", "Peru", ">50K"), ErrFormat},
		{"age-nan", adultLine("NaN", "Private", "Peru", ">50K"), ErrNotFinite},
		{"age-inf", adultLine("+Inf", "Private", "Peru", ">50K"), ErrNotFinite},
		{"empty-field", adultLine("20", "", "Peru", ">50K"), ErrFormat},
	}
	for _, tc := range cases {
		if _, err := parseAdultLine(tc.line); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "adult.data"), []byte(adultLine("20", "Private", "Peru", ">50K")+"\n"), 0o644)
	if _, err := Open("adult:"+dir, "train", 0); !errors.Is(err, ErrFormat) {
		t.Errorf("constant numeric columns: got %v, want ErrFormat", err)
	}
	os.WriteFile(filepath.Join(dir, "adult.data"), []byte("\n|junk\n"), 0o644)
	if _, err := Open("adult:"+dir, "train", 0); !errors.Is(err, ErrFormat) {
		t.Errorf("no records: got %v, want ErrFormat", err)
	}
}

// FuzzParseAdultLine: a line either parses into finite numbers and a 0/1 label or is
// rejected with ErrFormat/ErrNotFinite; never a panic.
func FuzzParseAdultLine(f *testing.F) {
	f.Add(adultLine("20", "Private", "Peru", ">50K."))
	f.Add("|1x3 Cross validator")
	f.Add("1,2,3")
	f.Add(adultLine("1e400", "?", "?", "<=50K"))
	f.Fuzz(func(t *testing.T, line string) {
		rec, err := parseAdultLine(line)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrNotFinite) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		for _, v := range rec.num {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite %v accepted", v)
			}
		}
		if rec.label != 0 && rec.label != 1 {
			t.Fatalf("label %d", rec.label)
		}
	})
}
