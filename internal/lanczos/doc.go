// Package lanczos is the symmetric Lanczos iteration shared by coreset (stochastic Lanczos
// quadrature) and fit (the PCI initializer).
package lanczos
