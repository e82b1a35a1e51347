//go:build !amd64

package gemm

// hasAVX2FMA is false off amd64: Dgemm is gonum's.
var hasAVX2FMA = false

func kern6x8(kc int, a, b, c []float64, ldc int, alpha float64) { panic("gemm: no AVX2") }
