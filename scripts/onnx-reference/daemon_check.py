#!/usr/bin/python3
"""The PyTorch side of scripts/onnx-daemon-check: the daemon's answers on an ONNX
reference model checked against PyTorch's exact eNTK.

    python3 daemon_check.py inputs MODEL.onnx DATA Q N OUTDIR
    python3 daemon_check.py check MODEL.onnx EXPORT.json OUTDIR

`inputs` writes OUTDIR/xs.ndjson (the first Q test inputs, one JSON array a line, as
the daemon will read them), OUTDIR/queries.tsv (kcat lines "request<TAB>query"), and
for Adult OUTDIR/train.csv (the first N training rows in the embmlp encoding, with a
label column, for `cairnctl produce --data csv:FILE`). DATA is "images:FILE" (an idx
test-images file; values p/255 as cairn's loaders read them) or "adult:DIR" (adult.data
and adult.test; data.adult's encoding, which is the one embmlp was trained on).

`check` reads OUTDIR/xs.ndjson and OUTDIR/answers.ndjson (the attributions, one JSON a
line) and EXPORT.json (GET /model). It rebuilds the network of MODEL.onnx from
models.py with the weights of the file's initializers (named as in names.json beside
it), in float64, checks it against the .ref.json beside the file (outputs, and the
kernel on two of its inputs), then computes the exact eNTK
k*(x_t, x_l) = <vec J_t, vec J_l>/d between every query and every exported landmark by
functorch.jacrev (J = df/dθ over every parameter, d outputs), ranks the landmarks for
each answer whose score is "entk" (and, for each "gradient" or "gradient_cosine" answer,
that ranking's scores over the stored points of OUTDIR/train.ndjson by torch.autograd,
Gradients; answers of another score count as not_entk, unchecked) and prints JSON: answers, certified, incorrect
(certified answers whose top-K set of (id, view) differs from PyTorch's top-K), the
answers whose intervals separate at the cut (lower > upper: certified or unstable) and
how many of those differ from PyTorch's top-K, the answers whose top-K equals
PyTorch's, and how far the answers' scores are from the float64 kernel.
"""

import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import functorch
import onnx
import onnx.numpy_helper

import data
import models

# The rebuilt module must reproduce the ref's float64 outputs; both are float64
# evaluations of the same float32 weights, so only summation order differs
# (a few ulps; verify.py holds npeval to 1e-10).
OUTPUT_RTOL = 1e-10
# The kernel on the ref's inputs against make.py's: the same computation up to
# summation order (make.py's autograd and jacrev kernels agree to 1e-16).
NTK_RTOL = 1e-10


def pad_line(key, value):
    """key TAB value, the value padded with spaces (JSON allows trailing white space)
    so that the line and its newline fill whole 1 KiB blocks: kcat reads stdin 1 KiB at
    a time, and a line ending mid-block would wait for the next line's bytes."""
    n = len(key) + 1 + len(value) + 1
    return key + "\t" + value + " " * ((-n) % 1024)


def idx(path, header):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()[header:]


def inputs(model_path, spec, q, n, out):
    """Also writes OUTDIR/train.ndjson: the N stored points as the daemon stores them
    ({"id", "x", "label"}), for the gradient ranking's reference."""
    kind, _, arg = spec.partition(":")
    train = []
    if kind == "images":  # images:NAME:TEST-IMAGES-FILE, the train files beside it
        name, _, arg = arg.partition(":")
        raw = idx(arg, 16)
        xs = [[p / 255 for p in raw[i * 784:(i + 1) * 784]] for i in range(q)]
        tr = idx(arg.replace("t10k-images-idx3", "train-images-idx3"), 16)
        lab = idx(arg.replace("t10k-images-idx3", "train-labels-idx1"), 8)
        train = [("%s/train/%06d" % (name, i), [p / 255 for p in tr[i * 784:(i + 1) * 784]], lab[i]) for i in range(n)]
    elif kind == "adult":
        xtr, ytr, xte, _, _ = data.adult(arg)
        xs = [encode_adult(r) for r in xte[:q].tolist()]
        with open(os.path.join(out, "train.csv"), "w") as f:
            f.write(",".join([f"x{j}" for j in range(xtr.shape[1])] + ["label"]) + "\n")
            for i, (r, y) in enumerate(zip(xtr[:n].tolist(), ytr[:n].tolist())):
                f.write(",".join(repr(v) for v in encode_adult(r)) + f",{y}\n")
                train.append(("csv/train/%06d" % i, encode_adult(r), int(y)))
    else:
        raise SystemExit(f"daemon_check.py: DATA {spec!r}: want images:NAME:FILE or adult:DIR")
    with open(os.path.join(out, "train.ndjson"), "w") as f:
        for i, x, y in train:
            f.write(json.dumps({"id": i, "x": x, "label": int(y)}) + "\n")
    with open(os.path.join(out, "xs.ndjson"), "w") as fx, open(os.path.join(out, "queries.tsv"), "w") as fq:
        for i, x in enumerate(xs):
            fx.write(json.dumps(x) + "\n")
            r = "x-%04d" % i
            fq.write(pad_line(r, json.dumps({"v": 1, "request": r, "x": x})) + "\n")


def encode_adult(row):
    """An embmlp row as the daemon gets it: 6 float32 numbers (as exact doubles), then
    8 integer category codes."""
    return [float(v) for v in row[:6]] + [int(v) for v in row[6:]]


def build(model_path):
    """The float64 module of model_path rebuilt from models.py and the file's
    initializers, with its .ref.json."""
    directory = os.path.dirname(os.path.abspath(model_path))
    name = os.path.basename(model_path)[:-len(".onnx")]
    with open(os.path.join(directory, name + ".ref.json")) as f:
        ref = json.load(f)
    with open(os.path.join(directory, "names.json")) as f:
        names = json.load(f)[name]
    base = name.rstrip("0123456789") if name.startswith("vit") else name
    model = {"resnet20": models.ResNet20, "vit": models.ViT, "convnet": models.convnet,
             "embmlp": lambda: models.EmbMLP(6, ref["cardinalities"])}[base]()
    proto = onnx.load(model_path)
    inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in proto.graph.initializer}
    sd = {k: inits[v] for k, v in names.items() if v is not None}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        raise AssertionError(f"{name}: weights from the ONNX file: missing {missing}, unexpected {unexpected}")
    return model.double().eval(), ref


class Jacobians:
    """J_x (d x P, every parameter in state_dict order) of a float64 module, for
    batches of inputs: functorch.jacrev of one example's outputs, vmapped over the
    batch (a loop over the examples where vmap has no batching rule)."""

    def __init__(self, model, shape):
        self.fmodel, params, self.buffers = functorch.make_functional_with_buffers(model)
        # Detached: functorch differentiates them anyway, and autograd keeps no graph.
        self.params = tuple(p.detach() for p in params)
        self.shape = shape
        self.vmap = True

    def one(self, x):
        jac = functorch.jacrev(lambda p: self.fmodel(p, self.buffers, x[None])[0])(self.params)
        return torch.cat([t.reshape(t.shape[0], -1) for t in jac], dim=1)

    def __call__(self, xs):
        xb = torch.tensor(xs, dtype=torch.float64).reshape(len(xs), *self.shape)
        if self.vmap:
            try:
                return functorch.vmap(self.one)(xb)
            except Exception as e:  # no batching rule for an op: loop instead
                print(f"daemon_check.py: vmap failed ({type(e).__name__}: {e}); looping", file=sys.stderr)
                self.vmap = False
        return torch.stack([self.one(x) for x in xb])


def kernel(jac, xs, ls, chunk):
    """k*(x_t, x_l) = <vec J_t, vec J_l>/d for every t in xs, l in ls (float64)."""
    jq = torch.cat([jac(xs[i:i + chunk]) for i in range(0, len(xs), chunk)])
    d = jq.shape[1]
    jq = jq.reshape(len(xs), -1)
    k = torch.empty(len(xs), len(ls), dtype=torch.float64)
    for i in range(0, len(ls), chunk):
        jl = jac(ls[i:i + chunk]).reshape(-1, jq.shape[1])
        k[:, i:i + chunk] = jq @ jl.T / d
    return k.detach().numpy()


class Gradients:
    """The gradient ranking's reference (certify.Gradient) by torch.autograd in float64
    over every parameter: a query's grad (f_c - f_o), c its largest output and o the
    largest other, and each stored point's grad log softmax(f(x))_y, computed once."""

    def __init__(self, model, shape, out):
        self.model, self.shape = model, shape
        self.params = [p for p in model.parameters()]
        with open(os.path.join(out, "train.ndjson")) as f:
            pts = [json.loads(l) for l in f if l.strip()]
        self.ids = [p["id"] for p in pts]
        self.classes = max(p["label"] for p in pts) + 1
        t0 = time.perf_counter()
        self.rows = torch.stack([self.grad(lambda f, y=p["label"]: torch.log_softmax(f, 0)[y], p["x"]) for p in pts])
        self.seconds = time.perf_counter() - t0

    def grad(self, fn, x):
        f = self.model(torch.tensor(x, dtype=torch.float64).reshape(1, *self.shape))[0]
        gs = torch.autograd.grad(fn(f), self.params)
        return torch.cat([g.reshape(-1) for g in gs]).detach()

    def scores(self, x, cosine=False):
        """Each stored point's <J_t^T u_t, J_i^T g_i>, or with cosine that over the two
        norms (certify.GradientCosineRadius; 0 where a norm is 0)."""
        def margin(f):
            c = int(torch.argmax(f[:self.classes]))
            o = max((k for k in range(f.shape[0]) if k != c), key=lambda k: float(f[k]))
            return f[c] - f[o]
        q = self.grad(margin, x)
        s = self.rows @ q
        if cosine:
            d = self.rows.norm(dim=1) * q.norm()
            s = torch.where(d > 0, s / torch.where(d > 0, d, torch.ones_like(d)), torch.zeros_like(s))
        return s.numpy()


def check_gradient(rep, grads, a, x, cert, sep):
    """Checks one gradient or gradient_cosine answer a (query x) against grads, as check
    does an entk one."""
    row = grads.scores(x, cosine=a.get("score") == "gradient_cosine")
    index = {i: j for j, i in enumerate(grads.ids)}
    K = len(a["topk"])
    order = np.argsort(-row, kind="stable")
    want = sorted(grads.ids[j] for j in order[:K])
    got = sorted(e["id"] for e in a["topk"])
    for e in a["topk"]:
        v = row[index[e["id"]]]
        rep["gradient_score_rel_err_max"] = max(rep["gradient_score_rel_err_max"], abs(e["score"] - v) / abs(v))
    rep["gradient_answers"] += 1
    rep["gradient_scores"][a["score"]] = rep["gradient_scores"].get(a["score"], 0) + 1
    if got == want:
        rep["topk_equal"] += 1
    else:
        rep["incorrect"] += cert
        rep["separated_incorrect"] += sep
        rep["disagreements"].append({"request": a["request"], "verdict": a["verdict"], "score": a["score"],
                                     "only_answer": sorted(set(got) - set(want)), "only_pytorch": sorted(set(want) - set(got))})


def check(model_path, export_path, out):
    torch.set_num_threads(2)
    model, ref = build(model_path)
    shape = ref["input_shape"]
    with torch.no_grad():
        got = model(torch.tensor(ref["inputs"], dtype=torch.float64).reshape(-1, *shape))
    want = torch.tensor(ref["outputs"], dtype=torch.float64)
    out_err = float(((got - want).abs() / want.abs().clamp(min=1)).max())
    if out_err > OUTPUT_RTOL:
        raise AssertionError(f"rebuilt module's outputs off the ref's by {out_err:.3g}")
    jac = Jacobians(model, shape)
    chunk = 4 if ref["num_params"] > 100000 else 16
    k2 = kernel(jac, ref["inputs"][:2], ref["inputs"][:2], chunk)
    kref = np.array(ref["ntk"])[:2, :2]
    ntk_err = float(np.abs(k2 - kref).max() / np.abs(kref).max())
    if ntk_err > NTK_RTOL:
        raise AssertionError(f"kernel on the ref's inputs off by {ntk_err:.3g} relative")
    with open(export_path) as f:
        exp = json.load(f)
    with open(os.path.join(out, "xs.ndjson")) as f:
        xs = [json.loads(l) for l in f if l.strip()]
    answers = {}
    with open(os.path.join(out, "answers.ndjson")) as f:
        for l in f:
            if l.strip():
                a = json.loads(l)
                answers.setdefault(a.get("request"), a)  # answers are at least once
    lms = exp["landmarks"]
    t0 = time.perf_counter()
    k = kernel(jac, xs, [l["x"] for l in lms], chunk)
    secs = time.perf_counter() - t0
    tags = [f"{l['id']}/{l['view']}" for l in lms]
    index = {t: i for i, t in enumerate(tags)}
    rep = {"model": os.path.basename(model_path), "params": int(sum(p.numel() for p in jac.params)),
           "landmarks": len(lms), "export_model": exp["model"], "queries": len(xs), "answers": 0,
           "certified": 0, "incorrect": 0, "separated": 0, "separated_incorrect": 0,
           "stability_known": 0, "variance_model": {}, "topk_equal": 0, "other_model": 0, "not_entk": 0,
           "verdicts": {}, "score_rel_err_max": 0.0, "min_gap_certified": None,
           "rebuild_output_err": out_err, "rebuild_ntk_err": ntk_err,
           "reference_seconds": round(secs, 1), "disagreements": [],
           "gradient_answers": 0, "gradient_scores": {}, "gradient_score_rel_err_max": 0.0}
    grads = None
    for i in range(len(xs)):
        a = answers.get("x-%04d" % i)
        if a is None:
            continue
        rep["answers"] += 1
        rep["verdicts"][a["verdict"]] = rep["verdicts"].get(a["verdict"], 0) + 1
        cert = a["verdict"] == "certified"
        rep["certified"] += cert
        # The intervals separate at the cut: certified, or unstable (separated, but the
        # pool's stability under another model.seed is below target or unknown).
        sep = a["lower"] > a["upper"]
        rep["separated"] += sep
        rep["stability_known"] += a.get("stability") is not None
        vm = a.get("variance_model")
        rep["variance_model"][vm] = rep["variance_model"].get(vm, 0) + 1
        if a["model"] != exp["model"]:
            rep["other_model"] += 1
            continue
        if a.get("score") in ("gradient", "gradient_cosine"):
            if grads is None:
                grads = Gradients(model, shape, out)
                rep["gradient_reference_seconds"] = round(grads.seconds, 1)
            check_gradient(rep, grads, a, xs[i], cert, sep)
            continue
        if a.get("score") != "entk":
            rep["not_entk"] += 1
            continue
        row = k[i]
        K = len(a["topk"])
        order = np.argsort(-row, kind="stable")
        want = sorted(tags[j] for j in order[:K])
        got = sorted(f"{e['id']}/{e['view']}" for e in a["topk"])
        for e in a["topk"]:
            v = row[index[f"{e['id']}/{e['view']}"]]
            rep["score_rel_err_max"] = max(rep["score_rel_err_max"], abs(e["score"] - v) / abs(v))
        gap = float((row[order[K - 1]] - row[order[K]]) / abs(row[order[K - 1]])) if K < len(row) else None
        if got == want:
            rep["topk_equal"] += 1
        else:
            rep["incorrect"] += cert
            rep["separated_incorrect"] += sep
            rep["disagreements"].append({"request": a["request"], "verdict": a["verdict"],
                                         "only_answer": sorted(set(got) - set(want)),
                                         "only_pytorch": sorted(set(want) - set(got)), "gap": gap})
        if cert and gap is not None:
            m = rep["min_gap_certified"]
            rep["min_gap_certified"] = gap if m is None else min(m, gap)
    if rep["answers"]:
        rep["certified_share"] = rep["certified"] / rep["answers"]
        rep["separated_share"] = rep["separated"] / rep["answers"]
    print(json.dumps(rep, indent=1))


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "inputs":
        inputs(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
