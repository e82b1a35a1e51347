// Package weights ships cairn's default trained backbones inside every binary and
// resolves which parameters a backbone is built with.
//
// # Shipped files
//
// Each file is a float32 safetensors state_dict (keys of entk.Arch.Tensors, loadable by
// PyTorch's safetensors or any reader of the format into the modules documented on
// entk.Arch) written by `cairnctl train`; Shipped lists them with the SHA-256 of the
// bytes, the test accuracy of the file as written, and the command that reproduces it bit
// for bit on this kind of machine (amd64 with AVX2/FMA; Train's workers are fixed at 2,
// so GOMAXPROCS does not matter). README.md in this directory has the same table with
// training times and PyTorch's accuracies. float32 costs nothing measurable: the
// accuracies are those of the float32 file reloaded, and PyTorch gets the same ones in
// float32 and in float64.
//
//	file                               arch                      test accuracy  SHA-256
//	mnist-convnet.safetensors          convnet:1x28x28-16-32-10  0.9904         c1e30285ff7cc392…
//	fashion-mnist-convnet.safetensors  convnet:1x28x28-16-32-10  0.9131         272e1b3044dc3560…
//	adult-resmlp.safetensors           resmlp:108-128x3-8        0.8550         743a7ce15679925c…
//
// The daemon's default backbone (convnet:1x28x28-16-32-10) uses the MNIST file; the
// Fashion-MNIST file has the same architecture and is chosen by name ("shipped:
// fashion-mnist") or by a cairnctl command's --data. The Adult ResMLP keeps the default
// 8-output head of cairnctl's tabular arch with the two labels on outputs 0 and 1, so
// that the commands' default arch for Adult finds it (the reason is on cairnctl train).
//
// # Resolution (Load)
//
//   - untrained: the seeded PyTorch-default initialization, entk.NewBackbone(arch, seed):
//     a test fixture, on which the eNTK sees all points alike.
//   - path "": the shipped file for the data set (when known) and arch, else the only
//     shipped file for arch (the daemon's case); an error when none is shipped.
//   - "shipped:NAME": the shipped file NAME (mnist, fashion-mnist, adult).
//   - anything else: a safetensors file on disk.
//
// Everything here is read-only and safe for concurrent use.
package weights

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/cairnhq/cairn/entk"
)

//go:embed *.safetensors
var files embed.FS

// File is one shipped weights file.
type File struct {
	Name         string  // "mnist", "fashion-mnist", "adult"
	Data         string  // data set it was trained on (dataset.Set.Name)
	Arch         string  // entk spec
	Path         string  // file name inside this package
	SHA256       string  // of the file's bytes
	TestAccuracy float64 // on the data set's full test split, of the file as written (4 decimals)
	Command      string  // reproduces the file
}

// Shipped lists the shipped files (the SHA-256 is checked against the embedded bytes by
// the package's tests).
var Shipped = []File{
	{Name: "mnist", Data: "mnist", Arch: "convnet:1x28x28-16-32-10", Path: "mnist-convnet.safetensors",
		SHA256: "c1e30285ff7cc3927212c4e29a3acbbfed938bf27a6c8f45e71d7e7d6bbb845b", TestAccuracy: 0.9904,
		Command: "cairnctl train --data mnist --arch convnet:1x28x28-16-32-10 --epochs 12 --batch 64 --lr 2e-3 --seed 1 --out mnist-convnet.safetensors"},
	{Name: "fashion-mnist", Data: "fashion-mnist", Arch: "convnet:1x28x28-16-32-10", Path: "fashion-mnist-convnet.safetensors",
		SHA256: "272e1b3044dc3560c62691ac5ca250c576766c83996fed3cbb84aea2767c8f95", TestAccuracy: 0.9131,
		Command: "cairnctl train --data fashion-mnist --arch convnet:1x28x28-16-32-10 --epochs 15 --batch 64 --lr 2e-3 --seed 1 --out fashion-mnist-convnet.safetensors"},
	{Name: "adult", Data: "adult", Arch: "resmlp:108-128x3-8", Path: "adult-resmlp.safetensors",
		SHA256: "743a7ce15679925c905bc2dc39527389d5bd7d04cd62aaf2f5712335d2994b7d", TestAccuracy: 0.8550,
		Command: "cairnctl train --data adult --arch resmlp:108-128x3-8 --epochs 10 --batch 128 --lr 1e-3 --seed 1 --out adult-resmlp.safetensors"},
}

// ErrNoShipped reports that no shipped weights match an architecture or name.
var ErrNoShipped = errors.New("weights: no shipped weights")

// Bytes returns the file's contents (a copy is not made: do not modify).
func (f File) Bytes() []byte {
	b, err := files.ReadFile(f.Path)
	if err != nil {
		panic("weights: embedded file missing: " + f.Path) // a build error, not input
	}
	return b
}

// Find returns the shipped file for the data set name (may be "") and arch: the one
// trained on that data set when there is one, else the first for arch.
func Find(data, arch string) (File, bool) {
	for _, f := range Shipped {
		if f.Arch == arch && f.Data == data {
			return f, true
		}
	}
	for _, f := range Shipped {
		if f.Arch == arch {
			return f, true
		}
	}
	return File{}, false
}

// ByName returns the shipped file called name.
func ByName(name string) (File, bool) {
	for _, f := range Shipped {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}

// Source says where a backbone's parameters came from: Weights is "shipped:NAME", a file
// path or "seeded:<seed>", SHA256 the hash of the file's bytes (of the float64
// little-endian parameters for a seeded one).
type Source struct {
	Weights string `json:"weights"`
	SHA256  string `json:"weights_sha256"`
}

// Load builds arch's backbone as the package comment's resolution says, for the data
// set named data ("" when unknown).
func Load(arch, path, data string, untrained bool, seed uint64) (entk.Backbone, Source, error) {
	if untrained {
		if path != "" {
			return nil, Source{}, fmt.Errorf("weights %q and untrained together: choose one", path)
		}
		b, err := entk.NewBackbone(arch, seed)
		if err != nil {
			return nil, Source{}, err
		}
		return b, Source{Weights: fmt.Sprintf("seeded:%d", seed), SHA256: paramsHash(b.Params())}, nil
	}
	var f File
	var ok bool
	switch {
	case path == "":
		if f, ok = Find(data, arch); !ok {
			return nil, Source{}, fmt.Errorf("%w for %q (data %q): pass a weights file, or ask for the untrained network explicitly", ErrNoShipped, arch, data)
		}
	case strings.HasPrefix(path, "shipped:"):
		if f, ok = ByName(strings.TrimPrefix(path, "shipped:")); !ok {
			return nil, Source{}, fmt.Errorf("%w called %q (have mnist, fashion-mnist, adult)", ErrNoShipped, path)
		}
	default:
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, Source{}, fmt.Errorf("weights: %w", err)
		}
		b, err := entk.LoadBackboneBytes(arch, raw)
		if err != nil {
			return nil, Source{}, fmt.Errorf("weights %s: %w", path, err)
		}
		sum := sha256.Sum256(raw)
		return b, Source{Weights: path, SHA256: hex.EncodeToString(sum[:])}, nil
	}
	if f.Arch != arch {
		return nil, Source{}, fmt.Errorf("%w: %q is for %q, not %q", ErrNoShipped, f.Name, f.Arch, arch)
	}
	b, err := entk.LoadBackboneBytes(arch, f.Bytes())
	if err != nil {
		return nil, Source{}, fmt.Errorf("shipped weights %s: %w", f.Name, err)
	}
	return b, Source{Weights: "shipped:" + f.Name, SHA256: f.SHA256}, nil
}

// paramsHash is the hex SHA-256 of float64 little-endian parameters.
func paramsHash(p []float64) string {
	h := sha256.New()
	var buf [8]byte
	for _, v := range p {
		u := math.Float64bits(v)
		for i := range buf {
			buf[i] = byte(u >> (8 * i))
		}
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
