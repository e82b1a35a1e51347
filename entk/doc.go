// Package entk computes the sketched empirical neural tangent kernel of a frozen backbone
// (paper eq. composed): exact per-example vector–Jacobian products, Gaussian heads, the
// subsampled randomized Hadamard transform, the feature map ψ_{h,s}, and the exact kernel
// and its diagonal for small networks.
package entk
