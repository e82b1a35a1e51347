#!/usr/bin/python3
"""Checks make.py's outputs without PyTorch: every <name>.ref.json in DIR against its
<name>.onnx.

    python3 verify.py DIR

For each pair: onnx.checker.check_model (with shape inference), the file under 2 MB,
the opset, every parameter of the ref its own initializer, of its shape, in the ref's
(state_dict) order among the initializers, the graph
evaluated in float64 by npeval.py on the ref's inputs against the ref's outputs, and the
kernel matrix symmetric, positive semi-definite and with a positive diagonal. Prints
the op types of each graph as a Markdown table (README.md holds a copy) and exits
non-zero on the first failure.
"""

import json
import os
import sys

import numpy as np
import onnx

import npeval

MAX_BYTES = 2 << 20
# npeval and PyTorch both compute in float64 from the same float32 weights; they differ
# only in summation order (im2col einsum against oneDNN/BLAS), a few ulps per op over
# at most a few hundred ops, far below this.
OUTPUT_RTOL = 1e-10
# Finite differences cost two graph evaluations per parameter element: only for the
# small models. Central differences with step 1e-6 in float64 are good to about 1e-9
# (step^2 times the third derivative, plus eps/step) where no ReLU kink lies within a
# step of a pre-activation; the bound leaves room for that.
FD_MAX_PARAMS = 5000
FD_RTOL = 1e-6


def check_one(directory, ref_file):
    with open(os.path.join(directory, ref_file)) as f:
        ref = json.load(f)
    path = os.path.join(directory, ref["onnx"])
    size = os.path.getsize(path)
    if size >= MAX_BYTES:
        raise AssertionError(f"{path}: {size} bytes, want < {MAX_BYTES}")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = {o.domain: o.version for o in model.opset_import}.get("", None)
    if opset != ref["opset"]:
        raise AssertionError(f"{path}: opset {opset}, ref says {ref['opset']}")
    inits = {t.name: t for t in model.graph.initializer}
    names = [p["onnx_name"] for p in ref["params"]]
    if [t.name for t in model.graph.initializer if t.name in set(names)] != names:
        raise AssertionError(f"{path}: parameters shared or not in initializer order")
    for p in ref["params"]:
        t = inits.get(p["onnx_name"])
        if t is None or list(t.dims) != p["shape"]:
            raise AssertionError(f"{path}: parameter {p['name']} ({p['onnx_name']}) missing or misshapen")
    n = len(ref["inputs"])
    x = np.array(ref["inputs"], np.float64).reshape([n] + ref["input_shape"])
    if not np.array_equal(x.astype(np.float32).astype(np.float64), x):
        raise AssertionError(f"{path}: inputs not float32-representable")
    (y,) = npeval.run(model, {model.graph.input[0].name: x})
    want = np.array(ref["outputs"])
    err = float(np.max(np.abs(y - want) / np.maximum(1, np.abs(want))))
    if y.shape != want.shape or err > OUTPUT_RTOL:
        raise AssertionError(f"{path}: numpy evaluation differs from the ref by {err:.3g}")
    k = np.array(ref["ntk"])
    eig = np.linalg.eigvalsh(k)
    if not np.array_equal(k, k.T) or eig.min() < -1e-12 * eig.max() or np.diag(k).min() <= 0:
        raise AssertionError(f"{path}: ntk not symmetric positive semi-definite")
    fd = fd_ntk_error(model, x, ref) if ref["num_params"] <= FD_MAX_PARAMS else None
    ops = sorted({node.op_type for node in model.graph.node})
    return ref, size, err, fd, ops


def fd_ntk_error(model, x, ref, step=1e-6):
    """The kernel from central differences of the numpy evaluation, one parameter
    element at a time, against the ref's (max abs difference over max |k|): an oracle
    for the Jacobians that shares nothing with PyTorch."""
    inits = {t.name: t for t in model.graph.initializer}
    name = model.graph.input[0].name
    cols = []
    for p in ref["params"]:
        t = inits[p["onnx_name"]]
        base = npeval._tensor(t)
        for i in range(base.size):
            ys = []
            for sign in (1, -1):
                w = base.copy()
                w.reshape(-1)[i] += sign * step
                ys.append(npeval.run(model, {name: x}, {t.name: w})[0])
            cols.append((ys[0] - ys[1]) / (2 * step))
    jac = np.stack(cols, axis=-1)  # (n, d, P)
    d = jac.shape[1]
    k = np.einsum("idp,jdp->ij", jac, jac) / d
    want = np.array(ref["ntk"])
    return float(np.abs(k - want).max() / np.abs(want).max())


def main(directory):
    refs = sorted(f for f in os.listdir(directory) if f.endswith(".ref.json"))
    if not refs:
        raise SystemExit(f"verify: no .ref.json files in {directory}")
    print("| model | opset | bytes | P | outputs: numpy vs ref | ntk: finite differences vs ref | op types |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for ref_file in refs:
        ref, size, err, fd, ops = check_one(directory, ref_file)
        if fd is not None and fd > FD_RTOL:
            raise AssertionError(f"{ref_file}: finite-difference kernel off by {fd:.3g}")
        fds = "-" if fd is None else f"{fd:.1e}"
        print(f"| {ref['model']} | {ref['opset']} | {size} | {ref['num_params']} | {err:.1e} | "
              f"{fds} | {', '.join(ops)} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
