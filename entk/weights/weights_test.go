package weights

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
)

// TestShipped: every listed file is embedded, its bytes have the listed SHA-256, and it
// loads as its architecture with finite parameters.
func TestShipped(t *testing.T) {
	if len(Shipped) == 0 {
		t.Fatal("no shipped weights")
	}
	for _, f := range Shipped {
		b := f.Bytes()
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
			t.Errorf("%s: SHA-256 %s, listed %s", f.Name, got, f.SHA256)
		}
		bb, err := entk.LoadBackboneBytes(f.Arch, b)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if bb.Arch() != f.Arch {
			t.Errorf("%s: arch %s", f.Name, bb.Arch())
		}
	}
}

// TestLoad: the resolution rules of the package comment, each checked by where the
// parameters came from.
func TestLoad(t *testing.T) {
	const arch = "convnet:1x28x28-16-32-10"
	b, src, err := Load(arch, "", "", false, 1)
	if err != nil || src.Weights != "shipped:mnist" {
		t.Fatalf("default for %s: %v, source %+v; want shipped:mnist", arch, err, src)
	}
	seeded, _ := entk.NewBackbone(arch, 1)
	if b.Params()[0] == seeded.Params()[0] && b.Params()[1] == seeded.Params()[1] {
		t.Error("the default backbone has the seeded initialization's parameters")
	}
	if f, ok := Find("fashion-mnist", arch); !ok || f.Name != "fashion-mnist" {
		t.Errorf("Find(fashion-mnist, %s) = %+v, want the Fashion-MNIST file", arch, f)
	}
	if _, src, err := Load("resmlp:108-128x3-8", "", "adult", false, 1); err != nil || src.Weights != "shipped:adult" {
		t.Errorf("Adult default: %v, %+v", err, src)
	}
	u, src, err := Load(arch, "", "mnist", true, 1)
	if err != nil || src.Weights != "seeded:1" || u.Params()[0] != seeded.Params()[0] {
		t.Fatalf("untrained: %v, %+v", err, src)
	}
	if _, _, err := Load("mlp:4-3", "", "", false, 1); !errors.Is(err, ErrNoShipped) {
		t.Errorf("an arch with no shipped weights: %v, want ErrNoShipped", err)
	}
	if _, _, err := Load(arch, "shipped:nope", "", false, 1); !errors.Is(err, ErrNoShipped) {
		t.Errorf("shipped:nope: %v, want ErrNoShipped", err)
	}
	if _, _, err := Load(arch, "x.safetensors", "", true, 1); err == nil {
		t.Error("a file and untrained together were accepted")
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	f, _ := ByName("mnist")
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fb, src, err := Load(arch, path, "", false, 1)
	if err != nil || src.Weights != path || src.SHA256 != f.SHA256 || fb.Params()[5] != b.Params()[5] {
		t.Errorf("from a file: %v, %+v", err, src)
	}
}

// TestShippedAccuracy: each shipped file, evaluated here on its data set's full test
// split, has the test accuracy Shipped lists (to its 4 decimals) and meets its target;
// its command names its arch and file. MNIST comes with the Go module and Adult with
// package dataset, so both are always checked; Fashion-MNIST (a Debian package) is
// skipped with a message on a machine without it.
func TestShippedAccuracy(t *testing.T) {
	target := map[string]float64{"mnist": 0.985, "fashion-mnist": 0.89, "adult": 0.845}
	spec := map[string]string{"mnist": "mnist", "fashion-mnist": "fashion-mnist", "adult": "adult"}
	for _, f := range Shipped {
		if !strings.Contains(f.Command, " --arch "+f.Arch+" ") || !strings.HasSuffix(f.Command, " --out "+f.Path) {
			t.Errorf("%s: command %q does not name --arch %s and --out %s", f.Name, f.Command, f.Arch, f.Path)
		}
		want, ok := target[f.Name]
		if !ok {
			t.Errorf("%s: no accuracy target", f.Name)
			continue
		}
		test, err := dataset.Open(spec[f.Name], "test", 0)
		if err != nil {
			if f.Name != "fashion-mnist" {
				t.Fatal(err)
			}
			t.Logf("%s: test split not available here, skipped: %v", f.Name, err)
			continue
		}
		b, err := entk.LoadBackboneBytes(f.Arch, f.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		acc := entk.Accuracy(b, test.X, test.Labels)
		if math.Abs(acc-f.TestAccuracy) > 0.5e-4 {
			t.Errorf("%s: test accuracy %.5f, listed %.4f", f.Name, acc, f.TestAccuracy)
		}
		if acc < want {
			t.Errorf("%s: test accuracy %.4f below the target %.3f", f.Name, acc, want)
		}
	}
}
