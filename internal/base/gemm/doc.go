// Package gemm is a blas.Float64 implementation for the numerical packages' large matrix
// products: gonum's pure-Go BLAS with Dgemm replaced by a blocked GEMM (packed panels, a
// micro-kernel in kernel_amd64.s, the row blocks spread over GOMAXPROCS goroutines joined
// before return) on amd64 machines with AVX2 and FMA, for products of at least 2^18
// multiply-adds. The micro-kernel is the widest the machine runs: 6×16 tiles in AVX-512
// registers (twice the multiply-adds per instruction), else 6×8 tiles in AVX2 ones. The
// fits' products (kernel blocks times coefficients and their gradients) are most of a
// refit's time, and gonum's Dgemm has no FMA kernel.
//
// # Contract
//
// Implementation satisfies blas.Float64 and is installed by the commands (cairnd,
// cairnctl) with blas64.Use before any numerical work; libraries never install it. Its
// Dgemm computes what blas.Float64 documents, within the usual error bound of a sum of k
// products (tested against a plain triple loop), and its result is a function of the
// arguments alone: the same bits whatever GOMAXPROCS or the split of the work (tested),
// so a replay on the same machine reproduces byte for byte. The two micro-kernels give
// every entry the same fused multiply-adds in the same order (tested), so an AVX-512
// machine and an AVX2 one agree bit for bit as well. It differs in the last bits
// from gonum's Dgemm, which products below the size threshold and machines without
// AVX2/FMA use. It is safe for concurrent use. On one goroutine it allocates only when
// its pooled packing buffers are empty (tested); spread over several, each call also
// allocates its goroutines' closures.
//
// DgemmSerial is the same blocked path on the calling goroutine alone, from 2^10
// multiply-adds, for callers that already run one product per core (the ONNX backbone's
// examples, whose transformer products of a few thousand to a few hundred thousand
// multiply-adds run 2–5× gonum's rate in it); it declines smaller products and machines
// without AVX2/FMA, and from 2^18 on gives Dgemm's bits (tested).
package gemm
