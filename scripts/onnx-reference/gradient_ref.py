#!/usr/bin/python3
"""The gradient ranking's oracle (certify.Gradient): PyTorch's scores on convnet.onnx.

    python3 gradient_ref.py ../../entk/onnx/testdata/convnet.onnx OUT.json

Rebuilds the network of the ONNX file in float64 (daemon_check.build, checked there
against its .ref.json), takes the .ref.json's first two inputs as queries and the other
six as stored points with the labels below, and writes, for every query t and point i,

    s_i(t) = <grad_theta (f_c - f_o)(x_t), grad_theta log softmax(f(x_i))_{y_i}>

by torch.autograd over every parameter: c is the query's largest output, o its largest
other output, and the second gradient is the point's negative cross-entropy gradient,
J_i^T (e_y - softmax(f(x_i))). It also writes the two gradients' norms. cairn's serving
test (internal/serving, TestGradientTorch) compares its gradient answers with this file.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_check import build  # noqa: E402

LABELS = [3, 1, 4, 1, 5, 9]


def main():
    model_path, out = sys.argv[1], sys.argv[2]
    model, ref = build(model_path)
    shape = ref["input_shape"]
    params = [p for p in model.parameters()]
    xs = torch.tensor(ref["inputs"], dtype=torch.float64).reshape(-1, *shape)
    queries, points = xs[:2], xs[2:2 + len(LABELS)]

    def grad(scalar):
        gs = torch.autograd.grad(scalar, params)
        return torch.cat([g.reshape(-1) for g in gs])

    vs = []
    for x in queries:
        f = model(x[None])[0]
        c = int(torch.argmax(f))
        o = max((k for k in range(f.shape[0]) if k != c), key=lambda k: float(f[k]))
        vs.append(grad(f[c] - f[o]))
    rs = []
    for x, y in zip(points, LABELS):
        f = model(x[None])[0]
        rs.append(grad(torch.log_softmax(f, 0)[y]))
    scores = [[float(v @ r) for r in rs] for v in vs]
    rep = {"model": os.path.basename(model_path), "torch_version": torch.__version__,
           "queries": [0, 1], "points": list(range(2, 2 + len(LABELS))), "labels": LABELS,
           "scores": scores, "query_norms": [float(v.norm()) for v in vs],
           "point_norms": [float(r.norm()) for r in rs]}
    with open(out, "w") as f:
        json.dump(rep, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
