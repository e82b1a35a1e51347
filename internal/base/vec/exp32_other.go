//go:build !amd64

package vec

// hasAVX512 is false off amd64: ExpShift32's loop runs.
var hasAVX512 = false

func expShiftLanes(x []float32, shift, scale float32, lanes *[16]float64) { panic("vec: no AVX-512") }
