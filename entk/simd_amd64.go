package entk

import "golang.org/x/sys/cpu"

// hasAVX2FMA says whether the AVX2/FMA kernels of simd_amd64.s may run: the CPU has AVX2
// and FMA and the OS saves the YMM registers (x/sys/cpu checks XGETBV). It is a variable
// only so that tests can run the portable loops on the same machine.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// hasAVX512 says whether the AVX-512 passes of fwht512_amd64.s may run (the foundation
// instructions, with the OS saving the ZMM registers); they run only while hasAVX2FMA is
// also true (avx512).
var hasAVX512 = hasAVX2FMA && cpu.X86.HasAVX512F

// Implemented in simd_amd64.s; the wrappers in simd.go check the lengths.

//go:noescape
func fmaRows2x16(zp, zq, cp, cq, w []float64, ldw int)

//go:noescape
func fmaRows1x16(zp, cp, w []float64, ldw int)

//go:noescape
func mulAVX(dst, a, b []float64)

//go:noescape
func scaleAVX(v []float64, c float64)

//go:noescape
func fwhtContig8AVX(v []float64)

//go:noescape
func fwhtRadix8AVX(v []float64, h int)

//go:noescape
func fwhtRadix4AVX(v []float64, h int)

//go:noescape
func fwhtRadix2AVX(v []float64, h int)

//go:noescape
func fwhtContig64Z(dst, src, signs []float64)

//go:noescape
func fwhtRadix8Z(v []float64, h int)

//go:noescape
func fwhtRadix4Z(v []float64, h int)

//go:noescape
func fwhtRadix2Z(v []float64, h int)

//go:noescape
func gerFMA(dst []float64, ld int, x []float64, inc, m int, y []float64)

//go:noescape
func acc4x12(dst []float64, ld int, src []float64, inc int, offs, rows []int32, mat []float64, k int)

//go:noescape
func acc1x12(dst, src []float64, offs, rows []int32, mat []float64, k int)
