// Package rng derives independent, reproducible random streams from one configured seed.
//
// Every random draw in cairn (Gaussian heads, SRHT signs and rows, augmentations,
// initializers, minibatch order, random deletion sets) comes from a stream named for its
// purpose, e.g. New(seed, "entk/heads/fit"). Two streams with different names are
// statistically independent; the same (seed, name) always yields the same sequence, on
// every platform, so replaying the same inputs reproduces state byte for byte.
//
// # Contract
//
//   - The derivation is SHA-256(seed as 8 big-endian bytes || name), split into the two
//     64-bit words of a PCG state (math/rand/v2). It never changes: changing it would
//     change every stored model.
//   - Names are part of the format. Use "/" separated paths: "package/purpose[/detail]".
//   - A *rand.Rand is not safe for concurrent use; give each goroutine its own stream
//     (derive per-worker names, or Sub).
package rng

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
)

// Seed derives the 64-bit seed of the stream (seed, name). It is what results report as
// "the seed of this draw", so a user can recreate the draw with New(Seed(..), "").
func Seed(seed uint64, name string) uint64 {
	a, _ := words(seed, name)
	return a
}

// New returns the stream named name under seed.
func New(seed uint64, name string) *rand.Rand {
	a, b := words(seed, name)
	return rand.New(rand.NewPCG(a, b))
}

// Sub names the i-th child of a stream: Sub("fit/minibatch", 3) == "fit/minibatch/3".
func Sub(name string, i int) string {
	return name + "/" + strconv.Itoa(i)
}

func words(seed uint64, name string) (uint64, uint64) {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seed)
	h := sha256.New()
	h.Write(buf[:])
	h.Write([]byte(name))
	sum := h.Sum(nil)
	return binary.BigEndian.Uint64(sum[0:8]), binary.BigEndian.Uint64(sum[8:16])
}
