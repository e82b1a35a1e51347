// Package onnx loads a network exported from PyTorch to ONNX and evaluates it, with its
// exact vector–Jacobian products with respect to its parameters, in float64.
package onnx
