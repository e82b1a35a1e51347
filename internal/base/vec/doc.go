// Package vec holds the dot-product kernels shared by coreset (pool inserts, greedy
// sweeps) and entk (the landmark kernel rows, sketched and exact), ExpShift32, the
// float32 exponentials of a softmax row (fit's SimCLR), and SameBits, the bit-for-bit
// equality under which ingest and serving reuse what they computed of an input.
//
// # Contract
//
// Dot(a, b) sums in four lanes (lane l the terms i ≡ l mod 4) by fused multiply-adds, the
// tail into lane 0, then (s0+s1)+(s2+s3). math.FMA rounds once on every machine, so Dot
// gives the same bits everywhere. DotsTo computes many Dots at once and gives each pair
// Dot's bits exactly, whatever the block sizes, the split of the work or the CPU: on
// amd64 with AVX2/FMA (golang.org/x/sys/cpu) blocks of pairs run the same lane chains in
// vector registers (dots_amd64.s; with AVX-512, two pairs' lanes to a ZMM register), long
// vectors in chunks whose lane sums are carried from one chunk to the next, elsewhere the
// loops call Dot. Dot32 and Dots32To are
// the same with the first factor stored in float32 and widened exactly (entk's exact
// kernel rows), bit for bit the same between the AVX2 blocks and the loops. ExpShift32
// gives the same bits with its AVX-512 loop and its portable one. Functions other than
// ExpShift32 (which overwrites its row) never modify their inputs; all allocate nothing
// (DotsTo's chunked path keeps its lane sums in a sync.Pool: a first long product on a P
// allocates them once), are safe for concurrent use, and panic on lengths that do not fit (programmer errors).
package vec
