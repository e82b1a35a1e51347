package vec

import "golang.org/x/sys/cpu"

// hasAVX2FMA says whether the kernels of dots_amd64.s may run (AVX2 and FMA, with OS support for the YMM
// registers). A variable so that tests can run the portable loops on the same machine.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// hasDots512 says whether dotLanes8x4Acc may run (AVX-512 F and VL, with OS support for
// the ZMM registers; x/sys/cpu checks it). A variable for the tests, as hasAVX2FMA.
var hasDots512 = hasAVX2FMA && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

//go:noescape
func dotLanes4x3Acc(lanes, f []float64, ldf int, z []float64, ldz, n int)

//go:noescape
func dotLanes8x4Acc(lanes, f []float64, ldf int, z []float64, ldz, n int)

//go:noescape
func dotLanes1x4(lanes, f, z []float64, ldz, n int)

//go:noescape
func dot32Lanes1x4Acc(lanes, f []float64, z []float32, ldz, n int)

//go:noescape
func addAVX(dst, src []float64)

//go:noescape
func setAVX(dst, src []float64)
