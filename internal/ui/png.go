package ui

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"sync"
)

// Shape is the (channels, height, width) of image inputs; the zero Shape means tabular
// inputs (a feature table instead of a picture).
type Shape struct{ C, H, W int }

// Image reports whether inputs are images.
func (s Shape) Image() bool { return s.C > 0 && s.H > 0 && s.W > 0 }

// encodePNG renders x (C·H·W values, channel-major as the convnet reads them) as a PNG of
// H×W pixels: one channel as gray, three as RGB (any other count: the first channel),
// each channel scaled from its own minimum and maximum to 0–255, so that a normalized
// input is shown with its full contrast. Non-finite values are shown as 0.
func encodePNG(x []float64, s Shape) ([]byte, error) {
	if !s.Image() || len(x) != s.C*s.H*s.W {
		return nil, fmt.Errorf("ui: %d values for an image of shape %d×%d×%d", len(x), s.C, s.H, s.W)
	}
	plane := s.H * s.W
	scale := func(c int) func(float64) uint8 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range x[c*plane : (c+1)*plane] {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		return func(v float64) uint8 {
			if !(hi > lo) || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0
			}
			return uint8(math.Round(255 * (v - lo) / (hi - lo)))
		}
	}
	var img image.Image
	if s.C == 3 {
		r, g, b := scale(0), scale(1), scale(2)
		m := image.NewRGBA(image.Rect(0, 0, s.W, s.H))
		for i := range plane {
			m.Set(i%s.W, i/s.W, color.RGBA{r(x[i]), g(x[plane+i]), b(x[2*plane+i]), 255})
		}
		img = m
	} else {
		g := scale(0)
		m := image.NewGray(image.Rect(0, 0, s.W, s.H))
		for i := range plane {
			m.Pix[i] = g(x[i])
		}
		img = m
	}
	var buf bytes.Buffer
	if err := pngEncoder.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pngEncoder compresses for speed and reuses its buffers (the compressor's state is
// most of the cost of a small picture).
var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngPool{}}

// pngPool is a png.EncoderBufferPool over a sync.Pool.
type pngPool struct{ p sync.Pool }

func (p *pngPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}

func (p *pngPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }
