//go:build !amd64

package gemm

import "unsafe"

// hasAVX2FMA and hasAVX512 are false off amd64: Dgemm is gonum's.
var hasAVX2FMA, hasAVX512 = false, false

func kern6x8(kc int, a, b, c []float64, ldc int, alpha float64) { panic("gemm: no AVX2") }

func kern6x16(kc int, a, b, c []float64, ldc int, alpha float64) { panic("gemm: no AVX-512") }

func kern6x16z(kc int, a, b, c []float64, ldc int, alpha float64) { panic("gemm: no AVX-512") }

func kern6x16s(kc int, a, b, c []float32, ldc int, alpha float32) { panic("gemm: no AVX2") }

func kern6x32s(kc int, a, b, c []float32, ldc int, alpha float32) { panic("gemm: no AVX-512") }

func moveRows(dst, src unsafe.Pointer, n, ldd, lds, width uintptr) {
	for r := uintptr(0); r < n; r++ {
		copy(unsafe.Slice((*byte)(unsafe.Add(dst, r*ldd)), width), unsafe.Slice((*byte)(unsafe.Add(src, r*lds)), width))
	}
}

func packBT16(pan, src unsafe.Pointer, lds, blocks uintptr) { panic("gemm: no AVX-512") }
