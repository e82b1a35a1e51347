"""A small numpy evaluator of ONNX graphs, in float64, independent of PyTorch.

It implements the operators that make.py's exports use, from the ONNX operator
specifications (https://onnx.ai/onnx/operators/), each in the plainest numpy form,
so that verify.py can check the exported graphs against the PyTorch outputs without
onnxruntime. Float tensors (initializers, constants, inputs) are widened to
float64; Cast to a float type keeps float64. Unknown operators and attributes this
evaluator does not implement raise NotImplementedError rather than guess.
"""

import math

import numpy as np
import onnx
from onnx import numpy_helper

_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
_INT_TYPES = {onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
              onnx.TensorProto.BOOL: np.bool_}


def _tensor(t):
    a = numpy_helper.to_array(t)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(x, w, b=None, group=1, pads=None, strides=None, dilations=None, kernel_shape=None,
          auto_pad=b"NOTSET"):
    if group != 1 or auto_pad not in (b"NOTSET", "NOTSET") or (dilations and any(d != 1 for d in dilations)):
        raise NotImplementedError("Conv: only group=1, explicit pads, dilation 1")
    kh, kw = w.shape[2:]
    pads = pads or [0, 0, 0, 0]
    sh, sw = strides or [1, 1]
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    # y[n,m,i,j] = sum_{c,p,q} x[n,c,i*sh+p,j*sw+q] w[m,c,p,q]
    y = np.einsum("ncijpq,mcpq->nmij", win, w)
    return y if b is None else y + b[None, :, None, None]


def _maxpool(x, kernel_shape, strides=None, pads=None, ceil_mode=0, dilations=None,
             storage_order=0, auto_pad=b"NOTSET"):
    if ceil_mode or (pads and any(pads)) or (dilations and any(d != 1 for d in dilations)):
        raise NotImplementedError("MaxPool: only ceil_mode=0, no padding, dilation 1")
    kh, kw = kernel_shape
    sh, sw = strides or [1, 1]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.max(axis=(4, 5))


def _batchnorm(x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise NotImplementedError("BatchNormalization: training_mode=1")
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon) * \
        scale.reshape(shape) + bias.reshape(shape)


def _layernorm(x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + epsilon) * scale
    return y if bias is None else y + bias


def _gemm(a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = alpha * (a.T if transA else a) @ (b.T if transB else b)
    return y if c is None else y + beta * c


def _reshape(x, shape, allowzero=0):
    shape = [int(s) for s in shape]
    if not allowzero:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _slice(x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a)] = slice(*slice(int(s), int(e), int(st)).indices(x.shape[int(a)]))
    return x[tuple(index)]


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _cast(x, to):
    if to in _FLOAT_TYPES:
        return x.astype(np.float64)
    if to in _INT_TYPES:
        return x.astype(_INT_TYPES[to])
    raise NotImplementedError(f"Cast to {to}")


def _shape(x, start=0, end=None):
    return np.array(x.shape[start:end], np.int64)


def _split(x, split=None, axis=0, num_outputs=None, n=1):
    if split is None:
        return np.split(x, n, axis=axis)
    return np.split(x, np.cumsum(split)[:-1], axis=axis)


_erf = np.vectorize(math.erf, otypes=[np.float64])

OPS = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a / b if a.dtype.kind == "f" else a // b,
    "Pow": lambda a, b: np.power(a, b),
    "Sqrt": np.sqrt,
    "Erf": _erf,
    "Relu": lambda x: np.maximum(x, 0),
    "Identity": lambda x: x,
    "MatMul": np.matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "MaxPool": _maxpool,
    "GlobalAveragePool": lambda x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True),
    "BatchNormalization": _batchnorm,
    "LayerNormalization": _layernorm,
    "Flatten": lambda x, axis=1: x.reshape(int(np.prod(x.shape[:axis])), -1),
    "Transpose": lambda x, perm=None: np.transpose(x, perm),
    "Reshape": _reshape,
    "Shape": _shape,
    "Gather": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "Unsqueeze": lambda x, axes: np.expand_dims(x, tuple(int(a) for a in axes)),
    "Squeeze": lambda x, axes=None: np.squeeze(x, None if axes is None else tuple(int(a) for a in axes)),
    "Concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "Expand": lambda x, shape: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(s) for s in shape))).copy(),
    "Slice": _slice,
    "Cast": _cast,
    "Softmax": _softmax,
    "ReduceMean": lambda x, axes=None, keepdims=1: x.mean(axis=None if axes is None else tuple(axes), keepdims=bool(keepdims)),
    "Split": _split,
    "Equal": lambda a, b: a == b,
    "Where": np.where,
}


def run(model, inputs, replace=None):
    """Evaluates model (an onnx.ModelProto) on inputs ({name: array}) and returns the
    graph outputs as a list of float64/int arrays, in graph output order. replace
    ({initializer name: array}) overrides initializers' values for this run."""
    g = model.graph
    env = {t.name: _tensor(t) for t in g.initializer}
    env.update(replace or {})
    for name, value in inputs.items():
        value = np.asarray(value)
        env[name] = value.astype(np.float64) if value.dtype.kind == "f" else value
    for node in g.node:
        attrs = _attrs(node)
        if node.op_type == "Constant":
            env[node.output[0]] = _tensor(attrs["value"])
            continue
        if node.op_type == "ConstantOfShape":
            fill = _tensor(attrs["value"]) if "value" in attrs else np.zeros(1)
            env[node.output[0]] = np.full(tuple(env[node.input[0]]), fill.reshape(-1)[0])
            continue
        op = OPS.get(node.op_type)
        if op is None:
            raise NotImplementedError(f"operator {node.op_type}")
        args = [env[i] if i else None for i in node.input]
        while args and args[-1] is None:
            args.pop()
        if node.op_type == "Split":
            attrs.setdefault("n", len(node.output))
        out = op(*args, **attrs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
    return [env[o.name] for o in g.output]
