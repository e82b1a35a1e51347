package gemm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2FMA says whether kern6x8 may run, and hasAVX512 whether kern6x16 may (the
// AVX-512 foundation instructions, with the operating system saving ZMM state). Variables
// so that tests can take the other paths on the same machine.
var (
	hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512  = hasAVX2FMA && cpu.X86.HasAVX512F
)

//go:noescape
func kern6x8(kc int, a, b, c []float64, ldc int, alpha float64)

//go:noescape
func kern6x16(kc int, a, b, c []float64, ldc int, alpha float64)

//go:noescape
func kern6x16z(kc int, a, b, c []float64, ldc int, alpha float64)

//go:noescape
func kern6x16s(kc int, a, b, c []float32, ldc int, alpha float32)

//go:noescape
func kern6x32s(kc int, a, b, c []float32, ldc int, alpha float32)

// moveRows copies n rows of width bytes, src's rows lds bytes apart, to dst's rows ldd
// bytes apart; width is 24, 48, 64 or 128 (see MoveRows).
//
//go:noescape
func moveRows(dst, src unsafe.Pointer, n, ldd, lds, width uintptr)

// packBT16 packs 8·blocks rows of a 16-column float64 panel of op(B) = Bᵀ from 16 rows of
// B, lds bytes apart (see packB). AVX-512F.
//
//go:noescape
func packBT16(pan, src unsafe.Pointer, lds, blocks uintptr)
