package vec

import "golang.org/x/sys/cpu"

// hasAVX512 says whether expShiftLanes may run (AVX-512 foundation, with OS support for
// the ZMM registers). A variable so that tests can run the portable loop on the same
// machine.
var hasAVX512 = cpu.X86.HasAVX512F

// expShiftLanes is ExpShift32's loop over x (len(x) a positive multiple of 16), adding
// e_j into lanes[j mod 16].
//
//go:noescape
func expShiftLanes(x []float32, shift, scale float32, lanes *[16]float64)
