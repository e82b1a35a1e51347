package onnx

import "slices"

// strides returns the row-major strides of shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

// broadcastShapes is the multidirectional (numpy) broadcast of shapes, or false when
// they do not broadcast.
func broadcastShapes(shapes ...[]int) ([]int, bool) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for i, d := range s {
			o := &out[r-len(s)+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// bcastMap returns, for each element of shape out in row-major order, the row-major index
// of the element of in it reads when in is broadcast to out (in aligned at the right, its
// size-1 dimensions repeated); nil when in already has out's shape, so the map is the
// identity. in must broadcast to out.
func bcastMap(in, out []int) []int32 {
	if slices.Equal(in, out) {
		return nil
	}
	return stridedMap(out, alignedStrides(in, out), 0)
}

// alignedStrides returns in's strides aligned to out's dimensions, 0 where in is
// broadcast (missing or size 1).
func alignedStrides(in, out []int) []int {
	st := strides(in)
	r := make([]int, len(out))
	for i := range in {
		o := len(out) - len(in) + i
		if in[i] != 1 || out[o] == 1 {
			r[o] = st[i]
		}
	}
	return r
}

// stridedMap lists, for each element of shape out in row-major order, base + Σ_i idx_i ·
// st[i]: the source index of a strided view (transpose, slice, broadcast).
func stridedMap(out, st []int, base int) []int32 {
	m := make([]int32, numel(out))
	if len(m) == 0 {
		return m
	}
	idx := make([]int, len(out))
	off := base
	for i := range m {
		m[i] = int32(off)
		for d := len(out) - 1; d >= 0; d-- {
			idx[d]++
			off += st[d]
			if idx[d] < out[d] {
				break
			}
			off -= st[d] * idx[d]
			idx[d] = 0
		}
	}
	return m
}
