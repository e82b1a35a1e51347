// Package onnx loads a network exported from PyTorch to ONNX and evaluates it, with its
// exact vector–Jacobian products with respect to its parameters, in float64.
//
// It is the engine behind entk.ONNX, the backbone that lets cairn's eNTK machinery (ψ
// features, exact kernel, exact rows) run on any PyTorch network made of the operators
// below. It knows nothing of entk: entk imports it.
//
// # Exporting from PyTorch
//
//	model.eval()
//	torch.onnx.export(model, torch.zeros(1, *input_shape), "model.onnx",
//	    opset_version=17, input_names=["input"], output_names=["output"],
//	    dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},  # optional
//	    training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
//
// PRESERVE keeps BatchNorm a BatchNormalization node (its inference form, since the
// module is in eval mode) instead of folding it into the convolutions, and
// do_constant_folding=False keeps every parameter its own named initializer: constant
// folding would transpose Linear weights into new "onnx::MatMul_N" initializers and merge
// equal-valued initializers behind Identity nodes. ExportRecipe holds the call; every
// coverage warning repeats it.
//
// # What a model may be
//
//   - The default operator set ("" or "ai.onnx") at versions 13–17 (MinOpset, MaxOpset);
//     a node of another domain is an error.
//   - One graph input, of a float type, whose first dimension is the batch: 1 or symbolic,
//     and dropped. The other dimensions are fixed by the file or by Options.InputShape.
//     An input x is one example's tensor flattened row-major (InDim values).
//   - One graph output; OutDim is its element count.
//   - External data (tensors stored beside the model, data_location = EXTERNAL) is read
//     from the model's directory (Options.Dir for LoadBytes); a location may not leave it.
//
// Shapes are fixed once the input shape is, so Shape and Size are constants, and every
// node whose inputs are all constants (Constant nodes, integer and unselected
// initializers, shapes) is evaluated once at load: the shape-only subgraphs exporters
// emit (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Cast, ConstantOfShape, Equal,
// Where, Reshape of constants, Range) fold to constants and cost nothing per example.
// What remains runs per example and must be one of the operators below; anything else
// fails with an *OpError naming the op, the node (its index and name) and the opset.
//
// # Operators (forward and VJP)
//
//	Conv                 1-D or 2-D, group 1, pads, strides, dilations, auto_pad
//	MaxPool, AveragePool 1-D or 2-D, pads, strides, dilations, ceil_mode (PyTorch's rule),
//	                     count_include_pad; GlobalAveragePool
//	BatchNormalization   inference form (training_mode 0), running mean and var constant
//	LayerNormalization   any axis, scale and optional bias of the normalized size
//	Gemm                 transA, transB, alpha, beta, C broadcast to [M, N]
//	MatMul               numpy matmul: batched, broadcast, 1-D operands promoted
//	Add Sub Mul Div Pow  numpy broadcasting, gradients summed back to each operand's shape
//	Relu Tanh Sigmoid Sqrt Erf Neg Exp Log
//	Softmax              one axis (opset 13 semantics)
//	ReduceMean           axes attribute, keepdims
//	Reshape Flatten Squeeze Unsqueeze Identity   views: no copy, no step (Dropout too,
//	                     in inference form)
//	Transpose Slice Expand Pad                   index maps (Pad: constant, reflect, edge); a
//	                     MatMul whose B is a 2-D Transpose (an exported Linear's weight)
//	                     reads its input transposed in place, and the Transpose runs
//	                     only if something else reads it
//	Concat Split Gather                          Gather also with run-time indices
//	Cast                 between float types the identity; float to integer truncates
//	Equal Where          with broadcasting (Where passes the gradient to the chosen side)
//	Constant Shape Size ConstantOfShape Range    constants
//
// Conventions where PyTorch's gradients are a choice: ReLU'(0) = 0; MaxPool's gradient
// goes to the first maximum of the window in row-major order; Pow's gradient in the
// exponent is 0 where the base is ≤ 0. Everything is computed in float64: casts between
// float types change nothing and LayerNormalization's stash_type is ignored. A run-time
// index outside [-n, n) (an embedding code out of range, or NaN) gives Gather a zero
// slice and no gradient rather than failing, since Forward returns no error: validate
// inputs first, as the daemon does. Model.IndexInputs lists the input positions that
// reach a Gather's indices unchanged (through a Cast to an integer type), with each
// table's size, for that validation.
//
// # Parameters
//
// The parameters are the float initializers that feed a parameter slot, seen through
// the layout-only nodes exporters put in between (Identity, Transpose, Reshape, Squeeze,
// Unsqueeze, Flatten, Expand, Cast):
//
//   - Conv weight and bias; Gemm and MatMul operands (weights, and biases of Gemm);
//   - BatchNormalization and LayerNormalization scale and bias (never BatchNorm's
//     running mean and var, which stay constants);
//   - the table of a Gather (an nn.Embedding);
//   - an initializer added to, subtracted from, multiplied with or concatenated to a
//     run-time tensor (position embeddings, class tokens, layer scales, the bias Add after
//     a MatMul), unless it has a single element (an epsilon or a scale that an exporter
//     made an initializer) and is not added straight to a MatMul, Gemm or Conv output
//     (the bias of nn.Linear(·, 1) on a 3-D input).
//
// Options.Params selects the kernel's parameters among them by initializer-name globs
// (path.Match: "layer3.*", "fc.*"); the rest are constants. Model.Params flattens the
// selected tensors in initializer order (PyTorch writes initializers in state_dict
// order), each row-major.
//
// # Coverage and warnings
//
// Model.Coverage lists every float initializer with its shape, size, whether it is a
// parameter and whether it is in the kernel (with its offset in Params), and the totals:
// tensors and elements in the kernel against those in the model, and their share. Its
// Warnings, each carrying ExportRecipe as the fix, report exports whose kernel is not the
// eNTK of the module's parameters:
//
//   - WarnFoldedBatchNorm: Conv weights named like onnx::Conv_N and no BatchNormalization
//     node (BatchNorm folded into the convolutions);
//   - WarnSharedInitializer: one initializer reaching several parameter slots through
//     Identity nodes (equal-valued initializers merged, their Jacobian columns summed);
//   - WarnUnusedParameter: kernel parameters no output depends on (zero columns).
//
// # Contracts
//
//   - A Model is immutable after Load and safe for concurrent use; Params and Coverage
//     alias its memory and must not be modified. A *Workspace belongs to one goroutine
//     and to the Model that made it (another model's panics, as does Backward before
//     Forward). Backward overwrites all of dst and may run any number of times after one
//     Forward.
//   - BackwardHeads(dst, w, h, ws) is h Backward calls (dst h×NumParams, w h×OutDim) in
//     one reverse sweep with the activation gradients of all heads held together
//     (head-major), so that Conv, Gemm and MatMul form one matrix product for the h
//     heads; each row equals Backward's within 1e-12 relative (the products' summation
//     order), tested on every operator and reference model. Its first call with h heads
//     on a workspace allocates their gradients (h times the activations) and scratch.
//   - Forward, Backward and BackwardHeads allocate nothing (after that first call), except that a matrix product of at least
//     2^18 multiply-adds runs in internal/base/gemm, whose helper goroutines cost a few small
//     allocations per product (16 per Forward+Backward of the MNIST convnet), unless
//     GOMAXPROCS goroutines are already inside passes of this package (a batch of examples,
//     one per core), when it runs on the calling goroutine (a stride-1 convolution's input
//     gradient for h heads always does, gemm.DgemmSerialFunc); smaller
//     products run serially, from 2^10 in its blocked path, below in gonum. Results are a function of the input and the model
//     alone, whatever GOMAXPROCS is.
//   - Load never panics on bad bytes (FuzzLoad): every problem is an error wrapping a
//     sentinel of errors.go. Options.MaxElements bounds what a file can make Load
//     allocate (the sum of every constant, activation, scratch and index table).
//   - Model.SHA256 is the digest of the model file's bytes (entk.ONNX's Arch names it).
package onnx
