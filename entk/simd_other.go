//go:build !amd64

package entk

// hasAVX2FMA is false off amd64: the portable loops of simd.go run.
var hasAVX2FMA = false

// hasAVX512 is false off amd64.
var hasAVX512 = false

func fmaRows2x16(zp, zq, cp, cq, w []float64, ldw int)                   { panic("entk: no AVX2") }
func fmaRows1x16(zp, cp, w []float64, ldw int)                           { panic("entk: no AVX2") }
func mulAVX(dst, a, b []float64)                                         { panic("entk: no AVX2") }
func scaleAVX(v []float64, c float64)                                    { panic("entk: no AVX2") }
func fwhtContig8AVX(v []float64)                                         { panic("entk: no AVX2") }
func fwhtRadix8AVX(v []float64, h int)                                   { panic("entk: no AVX2") }
func fwhtRadix4AVX(v []float64, h int)                                   { panic("entk: no AVX2") }
func fwhtRadix2AVX(v []float64, h int)                                   { panic("entk: no AVX2") }
func gerFMA(dst []float64, ld int, x []float64, inc, m int, y []float64) { panic("entk: no AVX2") }
func acc4x12(dst []float64, ld int, src []float64, inc int, offs, rows []int32, mat []float64, k int) {
	panic("entk: no AVX2")
}
func acc1x12(dst, src []float64, offs, rows []int32, mat []float64, k int) { panic("entk: no AVX2") }
func fwhtContig64Z(dst, src, signs []float64)                              { panic("entk: no AVX-512") }
func fwhtRadix8Z(v []float64, h int)                                       { panic("entk: no AVX-512") }
func fwhtRadix4Z(v []float64, h int)                                       { panic("entk: no AVX-512") }
func fwhtRadix2Z(v []float64, h int)                                       { panic("entk: no AVX-512") }
