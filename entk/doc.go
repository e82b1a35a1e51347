// Package entk computes the sketched empirical neural tangent kernel of a frozen backbone.
//
// Its parts (paper eq. composed) are exact per-example vector–Jacobian products, Gaussian heads, the
// subsampled randomized Hadamard transform (SRHT), the feature map ψ_{h,s}, and the exact
// kernel k*(x,x') = tr(J_x J_{x'}ᵀ)/d with its diagonal for small networks.
//
// # Backbones
//
// Specs: "mlp:D-h1-…-d", "resmlp:D-WIDTHxB-d", "convnet:CxHxW-c1-…-cL-d" (ParseArch; every
// number ≤ 2^20, P ≤ 2^28; errors wrap ErrArchSpec and quote the bad part). The matching
// PyTorch modules, whose state_dict keys LoadBackbone expects, are documented on Arch;
// parameters are flattened in state_dict order, row-major [out,in] / [out,in,3,3], inputs
// flattened CHW. Choices: the resmlp input projection is followed by a ReLU; MaxPool2d(2)
// floors odd sizes (the dropped row/column gets zero gradient); ReLU'(0) = 0; the max-pool
// gradient goes to the first maximal element in row-major window order.
//
// NewBackbone draws PyTorch's default initialization (weights and biases U(±1/√fan_in)) in
// state_dict order from the stream rng.New(seed, "entk/init"). LoadBackbone reads a
// safetensors file (F64, F32, F16, BF16) strictly and reports every problem at once, each
// naming the key and the shapes got vs want.
//
// # Invariants and concurrency
//
//   - A Backbone is immutable after construction and safe for concurrent use. Params()
//     aliases internal memory: callers must not modify it.
//   - A *Workspace belongs to one goroutine and to the backbone that made it (using it with
//     another backbone panics, as does Backward before Forward). Forward and Backward
//     allocate nothing; Backward overwrites all of dst and may be called any number of times
//     after one Forward (once per head).
//   - An SRHT, a Sketch and its heads never change after construction and are safe for
//     concurrent use given separate SketchWorkspaces. Do not modify what Heads(), Signs()
//     or Rows() return.
//   - Functions never modify their input slices; a destination argument is overwritten
//     entirely; wrong slice lengths are programmer errors and panic.
//
// # FWHT and SRHT
//
// FWHT overwrites v with H v, H = H_n/√n in Sylvester order ((H_n)_jk = (−1)^popcount(j&k)),
// symmetric and orthogonal, allocation-free. The low 11 stages run blockwise in L1 (three
// stages per pass in registers), the rest as radix-8 passes over the slice.
//
// SRHT S = √(P/s)·R·H·D: P = PaddedLen(p) (next power of two ≥ max(p, 2)), the input zero-
// padded to P; D is P Rademacher signs, then R is s rows drawn without replacement (partial
// Fisher–Yates) and kept in ascending order. s = 0 means no sketch: the identity on the
// unpadded vector. The P in Thm. srht-exact's factor (P−s)/((P−1)s) is the padded P.
//
// # Feature map
//
// NewSketch(b, h, s, seed, name) draws heads w_j ~ N(0, I/d) from rng.New(seed,
// "entk/heads/"+name) and one SRHT shared by all heads from rng.New(seed, "entk/srht/"+name),
// so the "fit" and "eval" draws of the paper are independent and each is reproducible from
// (seed, name). ψ(x) = h^{-1/2}[S J_xᵀw_1; …; S J_xᵀw_h] ∈ R^{h·q} with q = s (q = P unpadded
// when s = 0), so <ψ(x), ψ(y)> = K_{h,s}(x, y). FeaturesTo allocates nothing;
// FeaturesBatchTo spreads rows over min(GOMAXPROCS, n) goroutines that it joins before
// returning, each row bit-identical to FeaturesTo (a row depends only on x and the sketch,
// never on which workspace computed it or what it computed before).
//
// How FeaturesTo computes ψ (each step equal to the plain definition — a VJP per head,
// then SRHT.ApplyTo — up to rounding, ≤ 1e-12 relative, tested against that reference):
// on a ConvNet one Forward, then ConvNet.BackwardHeads, all h head VJPs in one
// multi-column backward sweep (the sweep Query uses for the d Jacobian rows); on the dense
// backbones one Forward and h Backward passes. S is applied by a pruned plan shared with
// Query that transforms only the 2^k-blocks of the padded vector that hold parameters and
// evaluates only the s kept rows. ConvNet.BackwardHeads is exported for that use: it
// writes the h×P VJPs of the rows of an h×d matrix of heads after a Forward on the same
// workspace, allocating its scratch in the workspace on the first call with a given h.
//
// # Queries
//
// A certified answer needs, for the query x, both ψ(x) under the evaluation draw and the
// exact diagonal k*(x, x) = ||J_x||²_F / d (eq. conservative-variance). Sketch.NewQuery
// returns a Query whose FeaturesDiagTo computes both from one forward pass: on a ConvNet
// it forms the d Jacobian rows J_xᵀe_i in one backward sweep and derives the heads'
// J_xᵀw_j = Σ_i w_ji J_xᵀe_i from them (d backward passes instead of h + d, one forward
// instead of two); ψ agrees with FeaturesTo and the diagonal with ExactDiag to rounding
// (≤ 1e-12 relative, tested). A Query is for one goroutine and uses one helper goroutine
// per phase, joined before it returns; it allocates nothing in steady state.
// KernelRowTo is the landmark kernel row <lf_l, ψ(x)>, one Dgemv split over two
// goroutines, bit-identical however it is split.
//
// # Vector kernels and reproducibility
//
// On amd64 CPUs with AVX2 and FMA (checked once at start through golang.org/x/sys/cpu,
// which also checks that the OS saves the YMM registers) the inner loops run in the
// assembly of simd_amd64.s; elsewhere the portable loops of simd.go, which document what
// each kernel computes. The FWHT passes, the sign flips and the scalings give the same
// bits either way. The convolution, the VJPs' rank-one updates and their
// register-blocked sums use one fused multiply-add per term where the portable loops round
// the product and the sum separately: within 1e-12 relative of them (tested), and
// bit-identical on every machine with the same kernels, so a replay on the same kind of
// machine reproduces the state byte for byte. Hosts of one deployment should therefore
// agree on AVX2/FMA (every x86-64 server since 2015 has both).
//
// # Exact kernel
//
// JacobianTo builds J_x (d×P) by d backward passes; ExactGramTo keeps all n Jacobians
// (n·d·P floats) and is meant for small networks, as in the verification commands.
// The query path uses the exact feature map instead (exactrows.go): Query.ExactTo writes
// φ(x) with <φ(x), φ(y)> = k*(x, y) (the body Jacobian rows and the final Linear in closed
// form, ExactDim floats), ExactBatch32To the landmarks' φ rounded to float32, ExactRowTo
// the exact kernel row of a query (allocation-free, split over two goroutines like
// KernelRowTo) and ExactRowError its rounding bound.
//
// For the dense backbones (mlp, resmlp) the rows also exist factored (factored.go), about
// d·P / Σ(in + d·out) times smaller (111× for resmlp:108-128x3-8: 8,172 floats against
// 904,321). Every parameter there is a Linear's weight or bias, whose Jacobian block for
// output i is δ_i ⊗ a and δ_i (a the layer's input, δ_i = ∂f_i/∂z), so
//
//	k*(x, y) = Σ_layers (<a_x, a_y> + 1)·<Δ̃_x, Δ̃_y>_F,   Δ̃ = d^{-1/2}[δ_1 … δ_d],
//
// the last Linear's Δ̃ being d^{-1/2}I (term <a_x, a_y> + 1). NewFactored says whether a
// backbone has them (false for the convnet) and lays them out (Dim: per Linear but the
// last, a then Δ̃; then the last one's a). A FactoredQuery (one per goroutine) computes a
// point's row and k*(x, x) with one Forward and one d-column backward sweep (RowTo), and
// the exact kernel row against float32 landmark rows (Factored.Batch32To) with two dot
// products per layer (KernelRowTo, or KernelRowsTo for a batch, bit for bit the same);
// each entry is within Factored.RowError = (2α + α² + γ_L(1+α)² + ρ)·sqrt(kll·ktt),
// α = (1+u₃₂)(1+γ_{N+3}) − 1, of k* (≈ 1.19e-7 relative: both factors of a product
// carry a float32 rounding; derivation in factored.go, attained to 0.85–0.94 when the
// roundings align, TestFactoredRowErrorTight). The factored kernel is an identity, not an
// approximation: it matches ExactKernel to 4e-16 relative (TestFactoredAgainstJacobian).
//
// # Training
//
// Train fits a backbone's parameters by minibatch Adam on the mean softmax cross-entropy
// of its d outputs, each example's gradient one exact VJP J_xᵀ(softmax(f(x)) − e_y) with
// the Forward and Backward above; it is how the shipped default weights (package
// entk/weights, written by `cairnctl train`) were made. The minibatch gradient is summed
// over fixed contiguous ranges per worker and the workers' sums are added in worker order,
// so, like the feature map, a run is reproducible bit for bit on one kind of machine for
// a fixed worker count. It lives here rather than in a package of its own because it
// rebinds workspaces to a new backbone per step (no copy of the parameters), which needs
// the package's internals.
package entk
