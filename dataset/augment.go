package dataset

import (
	"fmt"
	"strconv"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// Augmentation parameters (docs/architecture.md "Views"; paper appendix "Data and
// kernels" for tabular data, our documented choice for images).
const (
	// MaskProb is the probability that a tabular feature is masked (set to 0, which is the
	// train mean after standardization and "category absent" for a one-hot entry).
	MaskProb = 0.1
	// NoiseStd is the standard deviation of the Gaussian noise added to every feature
	// (tabular) or pixel (images, whose pixels lie in [0,1]).
	NoiseStd = 0.05
	// MaxShift is the largest image shift in pixels along each axis.
	MaxShift = 2
)

// Augmenter makes the two views of a point as a pure function of (seed, id, view): the
// view's random stream is rng.New(seed, "dataset/view/<id>/<view>"), so a view depends
// on nothing else (not on arrival order, other points or earlier calls), and any two
// (id, view) pairs get independent streams. An Augmenter is immutable and safe for
// concurrent use.
type Augmenter struct {
	seed  uint64
	d     int
	shape [3]int
}

// NewAugmenter returns the augmenter of d-dimensional points: tabular when shape is all
// zero, images of shape (C, H, W) otherwise. It panics if C·H·W != d or d < 1.
func NewAugmenter(d int, shape [3]int, seed uint64) *Augmenter {
	if d < 1 {
		panic(fmt.Sprintf("dataset: augmenter dimension %d < 1", d))
	}
	if shape != [3]int{} && shape[0]*shape[1]*shape[2] != d {
		panic(fmt.Sprintf("dataset: image shape %v does not hold d = %d values", shape, d))
	}
	return &Augmenter{seed: seed, d: d, shape: shape}
}

// Augmenter returns the augmenter of s's kind (image or tabular) and dimension.
func (s *Set) Augmenter(seed uint64) *Augmenter { return NewAugmenter(s.D, s.Shape, seed) }

// StreamName is the rng stream name of view v of point id.
func StreamName(id string, view int) string {
	return "dataset/view/" + id + "/" + strconv.Itoa(view)
}

// ViewTo writes view (0 or 1) of the point x with identifier id into dst. x is not
// modified; dst must have length d and must not overlap x. Draws, in this order (the
// order is part of the reproducibility contract):
//
//	tabular: for j := range d { masked := U() < MaskProb; e := N(0,1)
//	                           dst[j] = (masked ? 0 : x[j]) + NoiseStd·e }
//	images:  dy := IntN(2·MaxShift+1) − MaxShift; dx := likewise
//	         for c, i, j (row-major) { dst[c,i,j] = x[c, i−dy, j−dx] (0 outside) + NoiseStd·N(0,1) }
//
// so an image moves dy pixels down and dx right, zero-filled at the border; noise is
// added everywhere and values are not clipped.
func (a *Augmenter) ViewTo(dst, x []float64, id string, view int) {
	if len(x) != a.d || len(dst) != a.d {
		panic(fmt.Sprintf("dataset: ViewTo lengths dst %d, x %d, want %d", len(dst), len(x), a.d))
	}
	if view != 0 && view != 1 {
		panic(fmt.Sprintf("dataset: view %d, want 0 or 1", view))
	}
	if &dst[0] == &x[0] {
		panic("dataset: ViewTo dst overlaps x")
	}
	r := rng.New(a.seed, StreamName(id, view))
	if a.shape == [3]int{} {
		for j, v := range x {
			if r.Float64() < MaskProb {
				v = 0
			}
			dst[j] = v + NoiseStd*r.NormFloat64()
		}
		return
	}
	dy := r.IntN(2*MaxShift+1) - MaxShift
	dx := r.IntN(2*MaxShift+1) - MaxShift
	c, h, w := a.shape[0], a.shape[1], a.shape[2]
	for ch := range c {
		img := x[ch*h*w : (ch+1)*h*w]
		out := dst[ch*h*w : (ch+1)*h*w]
		for i := range h {
			si := i - dy
			for j := range w {
				sj := j - dx
				var v float64
				if si >= 0 && si < h && sj >= 0 && sj < w {
					v = img[si*w+sj]
				}
				out[i*w+j] = v + NoiseStd*r.NormFloat64()
			}
		}
	}
}
