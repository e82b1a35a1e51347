//go:build !amd64

package vec

// hasAVX2FMA is false off amd64: the loops of dots.go run.
var hasAVX2FMA, hasDots512 = false, false

func dotLanes4x3Acc(lanes, f []float64, ldf int, z []float64, ldz, n int) {
	panic("vec: no AVX2")
}
func dotLanes8x4Acc(lanes, f []float64, ldf int, z []float64, ldz, n int) {
	panic("vec: no AVX-512")
}
func dotLanes1x4(lanes, f, z []float64, ldz, n int) { panic("vec: no AVX2") }

func dot32Lanes1x4Acc(lanes, f []float64, z []float32, ldz, n int) { panic("vec: no AVX2") }

func addAVX(dst, src []float64) { panic("vec: no AVX2") }

func setAVX(dst, src []float64) { panic("vec: no AVX2") }
