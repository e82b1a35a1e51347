package gemm

import "golang.org/x/sys/cpu"

// hasAVX2FMA says whether kern6x8 may run. A variable so that tests can take the
// portable path on the same machine.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func kern6x8(kc int, a, b, c []float64, ldc int, alpha float64)
