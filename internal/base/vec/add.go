package vec

// AddTo adds src to dst entry by entry: dst[i] += src[i] for i < len(src). It panics if
// dst is shorter than src.
func AddTo(dst, src []float64) {
	dst = dst[:len(src)]
	if hasAVX2FMA && len(src) >= 16 {
		addAVX(dst, src)
		return
	}
	for i, v := range src {
		dst[i] += v
	}
}

// SetTo sets dst[i] = 0 + src[i] for i < len(src): src's values, with −0 turned to +0
// (what adding src to a cleared dst gives). It panics if dst is shorter than src.
func SetTo(dst, src []float64) {
	dst = dst[:len(src)]
	if hasAVX2FMA && len(src) >= 16 {
		setAVX(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = zero + v
	}
}

// zero is a variable so that 0 + v is not folded to v.
var zero = 0.0
