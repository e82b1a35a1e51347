#!/usr/bin/python3
"""Trains small reference models briefly, exports them to ONNX and writes their exact
eNTK values, the oracle for cairn's ONNX backbone loader (entk/onnx). README.md beside
this file says how to run it and what each output holds; verify.py re-checks the
outputs without PyTorch's help.

    python3 make.py --mnist DIR --fashion-mnist DIR --adult DIR \
        --convnet-weights FILE --out DIR [--only NAME,...] [--no-timing | --timing-only]
"""

import argparse
import copy
import functools
import json
import os
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F
import functorch
import onnx
import onnx.numpy_helper

import data
import models
import verify

SEED = 1
N_REF = 8


def train(model, x, y, epochs, batch, lr, seed):
    """Adam on the mean softmax cross-entropy, shuffled by a generator seeded with
    seed; returns the wall-clock seconds."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    start = time.perf_counter()
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()
    return time.perf_counter() - start


@torch.no_grad()
def accuracy(model, x, y):
    return float((model(x).argmax(1) == y).double().mean())


@torch.no_grad()
def untie(model, seed):
    """Perturbs every parameter whose values equal an earlier one's (same shape, every
    element equal) by a seeded 1e-3 relative amount, rounded to float32; returns the
    names changed. The exporter merges equal initializers in eval mode (one initializer
    behind Identity nodes for both), and then the ONNX graph's Jacobian has one summed
    column where the module has two. Training makes such twins where two parameters get
    equal gradients from equal starts: ResNet-20's bn2 and shortcut-BatchNorm biases in a
    downsampling block both add to the same sum, start at 0 and stay equal."""
    g = torch.Generator().manual_seed(seed)
    seen, changed = [], []
    for name, p in param_list(model):
        if any(q.shape == p.shape and torch.equal(q, p) for q in seen):
            p.add_(1e-3 * (1 + p.abs()) * torch.randn(p.shape, generator=g))
            changed.append(name)
        seen.append(p.detach().clone())
    return changed


def export(model, example, path, opset):
    """The export the ONNX loader is written against: eval-mode model, training=PRESERVE
    (so no eval peephole folds BatchNorm into Conv) and no constant folding (so
    initializers keep their state_dict names), a dynamic batch axis."""
    torch.onnx.export(model.eval(), example, path, training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False, opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def param_list(model):
    """(name, tensor) of the float parameters in state_dict order: every state_dict
    entry that is a parameter, i.e. all but BatchNorm's running statistics."""
    names = {n for n, _ in model.named_parameters()}
    sd = model.state_dict(keep_vars=True)
    return [(k, v) for k, v in sd.items() if k in names]


def jacobians(model64, xs):
    """J_i (d x P) for each row of xs by d reverse passes through the float64 model."""
    params = [p for _, p in param_list(model64)]
    out = []
    for x in xs:
        f = model64(x[None])[0]
        rows = []
        for k in range(f.shape[0]):
            g = torch.autograd.grad(f[k], params, retain_graph=True)
            rows.append(torch.cat([t.reshape(-1) for t in g]))
        out.append(torch.stack(rows))
    return out


def gram(js):
    """k*(x_i, x_j) = <vec J_i, vec J_j>/d, each pair one float64 dot product, mirrored
    so the matrix is exactly symmetric."""
    n, d = len(js), js[0].shape[0]
    k = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            k[i, j] = k[j, i] = float(torch.dot(js[i].reshape(-1), js[j].reshape(-1))) / d
    return k


def jacrev_gram(model64, xs):
    """The same kernel by functorch's jacrev over all parameters, an independent route
    (forward-mode-free, batched vmap of VJPs) used only as a cross-check."""
    fmodel, params, buffers = functorch.make_functional_with_buffers(model64)
    js = []
    for x in xs:
        jac = functorch.jacrev(lambda p: fmodel(p, buffers, x[None])[0])(params)
        js.append(torch.cat([t.reshape(t.shape[0], -1) for t in jac], dim=1))
    return gram(js)


def reference(name, model, xs, opset, meta):
    """The .ref.json content for model on the float32 inputs xs."""
    model64 = copy.deepcopy(model).double().eval()
    x64 = xs.double()
    with torch.no_grad():
        outputs = model64(x64)
        outputs32 = model.eval()(xs)
    js = jacobians(model64, x64)
    k = gram(js)
    k2 = jacrev_gram(model64, x64)
    rel = float(np.abs(k - k2).max() / np.abs(k).max())
    if rel > 1e-12:
        raise AssertionError(f"{name}: autograd and jacrev kernels differ by {rel:.3g} relative")
    plist = param_list(model)
    params = [{"name": n, "shape": list(p.shape), "size": p.numel()} for n, p in plist]
    buffers = [{"name": n, "shape": list(b.shape)} for n, b in model.named_buffers()]
    flat = xs.reshape(len(xs), -1).double()
    if not torch.equal(flat.float().double(), flat):
        raise AssertionError(f"{name}: inputs are not float32-representable")
    ref = {
        "model": name,
        "onnx": f"{name}.onnx",
        "opset": opset,
        "torch_version": torch.__version__,
        "input_shape": list(xs.shape[1:]),
        "d": int(outputs.shape[1]),
        "num_params": sum(p["size"] for p in params),
        "params": params,
        "buffers": buffers,
        "inputs": flat.tolist(),
        "outputs": outputs.tolist(),
        "outputs_float32": outputs32.double().tolist(),
        "ntk": k.tolist(),
        "ntk_method": ("float64 model (float32 weights widened exactly); J_i by d reverse "
                       "passes of torch.autograd.grad over the params list; k[i][j] = "
                       "<vec J_i, vec J_j>/d, one float64 dot product per pair, mirrored. "
                       f"functorch.jacrev gave the same matrix to {rel:.2g} relative."),
    }
    ref.update(meta)
    return ref, js


def hadamard(k):
    """Sylvester's unnormalized H_{2^k} = H_2 kron ... kron H_2, (H)_ij = (-1)^popcount(i&j)."""
    h2 = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    return functools.reduce(torch.kron, [h2] * k, torch.ones(1, 1))


def fwht(v):
    """Unnormalized Walsh-Hadamard transform of the last axis (n = 2^k) in Sylvester
    order, the transform entk.FWHT applies before its 1/sqrt(n): stage h maps
    (a, b) = (v[j], v[j+h]) within each block of 2h to (a + b, a - b). The stages
    ping-pong between two buffers (no allocation per stage). Butterflies rather than
    matmuls by small dense H because Debian's torch multiplies through the reference
    BLAS (libblas3), far slower than these memory-bound passes."""
    shape, n = v.shape, v.shape[-1]
    src = v.reshape(-1, n).clone()
    dst = torch.empty_like(src)
    h = 1
    while h < n:
        x, y = src.view(-1, n // (2 * h), 2, h), dst.view(-1, n // (2 * h), 2, h)
        torch.add(x[:, :, 0], x[:, :, 1], out=y[:, :, 0])
        torch.sub(x[:, :, 0], x[:, :, 1], out=y[:, :, 1])
        src, dst = dst, src
        h *= 2
    return src.reshape(shape)


def featurizer(model, example, h, s, seed):
    """psi(x) = h^{-1/2}[S J_x^T w_1; ...; S J_x^T w_h] for a batch of x (float32), with
    w_j ~ N(0, I/d), S = sqrt(P'/s) R H D the SRHT (P' = next power of two >= P, D
    Rademacher signs, H = H_P'/sqrt(P'), R s sorted rows without replacement): one
    functorch vjp per example, vmapped over the h heads, and vmapped over the batch."""
    check = torch.randn(3, 1 << 9, dtype=torch.float64)
    if not torch.allclose(fwht(check), check @ hadamard(9).double(), rtol=1e-12, atol=1e-12):
        raise AssertionError("fwht is not the Sylvester-order Hadamard transform")
    fmodel, params, buffers = functorch.make_functional_with_buffers(model.eval())
    p = sum(t.numel() for t in params)
    pp = 1 << max(1, (p - 1).bit_length())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        d = fmodel(params, buffers, example[None]).shape[1]
    heads = torch.randn(h, d, generator=g) / d ** 0.5
    signs = torch.randint(0, 2, (pp,), generator=g).float() * 2 - 1
    rows = torch.randperm(pp, generator=g)[:s].sort().values
    scale = (h * s) ** -0.5  # sqrt(P'/s) * (1/sqrt(P')) * h^{-1/2}

    def vjps(x):
        _, fn = functorch.vjp(lambda q: fmodel(q, buffers, x[None])[0], params)
        (gs,) = functorch.vmap(fn)(heads)  # vjp returns one cotangent per argument
        return torch.cat([t.reshape(h, -1) for t in gs], dim=1)

    def psi(xb, parts=None):
        t0 = time.perf_counter()
        gmat = functorch.vmap(vjps)(xb)  # (B, h, P): row j is J_x^T w_j
        t1 = time.perf_counter()
        z = fwht(F.pad(gmat, (0, pp - p)) * signs)[..., rows] * scale
        if parts is not None:
            parts[0] += t1 - t0
            parts[1] += time.perf_counter() - t1
        return z.reshape(len(xb), h * s), gmat

    return psi, heads, p, pp


def features_timing(name, model, xs, xcheck, js, h=4, s=1024, batch=8, reps=5):
    """Rows/s of the featurizer on 2 threads: reps timed passes over xs (float32) after
    one untimed warm-up batch, the fastest reported (on a shared machine the least
    disturbed one; the median and all passes are kept too); also checks its VJPs on
    xcheck against their float64 Jacobians js (J_x^T w_j, to float32 rounding)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        psi, heads, p, pp = featurizer(model, xs[0], h, s, SEED)
        with torch.no_grad():
            _, gmat = psi(xcheck)
        for i, j in enumerate(js):
            want = heads.double() @ j  # (h, P)
            err = float((gmat[i].double() - want).abs().max() / want.abs().max())
            if err > 1e-4:
                raise AssertionError(f"{name}: featurizer VJP off by {err:.3g} relative")
        runs = []
        for _ in range(reps):
            parts = [0.0, 0.0]
            start, cpu = time.perf_counter(), time.process_time()
            with torch.no_grad():
                for i in range(0, len(xs), batch):
                    psi(xs[i:i + batch], parts)
            runs.append((time.perf_counter() - start, parts, time.process_time() - cpu))
        total, parts, _ = min(runs, key=lambda r: r[0])
        median = sorted(r[0] for r in runs)[len(runs) // 2]
        cpu = min(r[2] for r in runs)
    finally:
        torch.set_num_threads(threads)
    return {
        "rows_per_s": round(len(xs) / total, 2),
        "median_rows_per_s": round(len(xs) / median, 2),
        "rows_per_cpu_s": round(len(xs) / cpu, 2),
        "rows": len(xs), "batch": batch, "heads": h, "s": s, "P": p, "P_padded": pp,
        "dtype": "float32", "threads": 2, "repeats": reps,
        "vjp_seconds": round(parts[0], 3), "srht_seconds": round(parts[1], 3),
        "all_rows_per_s": [round(len(xs) / r[0], 2) for r in runs],  # in the order run
        "method": ("torch.set_num_threads(2); functorch.make_functional_with_buffers, then "
                   "vmap over the batch of (functorch.vjp per example, vmap over the h heads "
                   "w_j ~ N(0, I/d)); zero-pad to P_padded, Rademacher signs, an unnormalized "
                   "FWHT of log2(P_padded) torch butterfly stages, s sorted rows, times "
                   "(h*s)^-1/2. Wall clock (time.perf_counter) over all rows in batches, "
                   "after one warm-up batch; rows_per_s from the fastest repeat, "
                   "median_rows_per_s from the median; rows_per_cpu_s counts the process's "
                   "CPU time (time.process_time, both threads) of its least-CPU repeat, "
                   "less sensitive than wall clock to other processes on a shared machine; "
                   "no data loading."),
        "machine": f"{platform.machine()} {cpu_model()}, {os.cpu_count()} logical CPUs",
        "load_average": [round(v, 2) for v in os.getloadavg()],
    }


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def build_resnet20(args):
    xte, yte = data.images(args.fashion_mnist, "t10k")
    torch.manual_seed(SEED)
    m = models.ResNet20()
    if args.timing_only:
        return m, xte[:N_REF], xte[N_REF:N_REF + 48], None
    xtr, ytr = data.images(args.fashion_mnist, "train")
    # lr 1e-3: at 2e-3 the eval-mode (running-statistics) accuracy lags far behind
    # the train-mode one after so few steps (0.56 against 0.75 here).
    n, epochs, batch, lr = 4000, 2, 64, 1e-3
    secs = train(m, xtr[:n], ytr[:n], epochs, batch, lr, SEED)
    meta = training_meta("fashion-mnist", n, epochs, batch, lr, secs, accuracy(m, xte[:2000], yte[:2000]))
    return m, xte[:N_REF], xte[N_REF:N_REF + 48], meta


def build_vit(args):
    xte, yte = data.images(args.mnist, "t10k")
    torch.manual_seed(SEED)
    m = models.ViT()
    if args.timing_only:
        return m, xte[:N_REF], xte[N_REF:N_REF + 48], None
    xtr, ytr = data.images(args.mnist, "train")
    n, epochs, batch, lr = 6000, 2, 64, 2e-3
    secs = train(m, xtr[:n], ytr[:n], epochs, batch, lr, SEED)
    meta = training_meta("mnist", n, epochs, batch, lr, secs, accuracy(m, xte[:2000], yte[:2000]))
    return m, xte[:N_REF], xte[N_REF:N_REF + 48], meta


def build_embmlp(args):
    xtr, ytr, xte, yte, cards = data.adult(args.adult)
    torch.manual_seed(SEED)
    m = models.EmbMLP(6, cards)
    n, epochs, batch, lr = 8000, 2, 64, 2e-3
    secs = train(m, xtr[:n], ytr[:n], epochs, batch, lr, SEED)
    meta = training_meta("adult", n, epochs, batch, lr, secs, accuracy(m, xte[:2000], yte[:2000]))
    meta["input_encoding"] = ("6 numeric columns (age, fnlwgt, education-num, capital-gain, "
                              "capital-loss, hours-per-week) standardized by the train file's mean "
                              "and population std, then 8 categorical columns (workclass, education, "
                              "marital-status, occupation, relationship, race, sex, native-country) "
                              "as the index of the value among the train file's values in sorted "
                              "byte order ('?' included), as a float")
    meta["cardinalities"] = cards
    return m, xte[:N_REF], None, meta


def build_convnet(args):
    xte, yte = data.images(args.mnist, "t10k")
    m = models.convnet()
    m.load_state_dict(data.safetensors(args.convnet_weights), strict=True)
    m.eval()
    meta = {"training": {"data": "none: cairn's shipped weights " + os.path.basename(args.convnet_weights),
                         "arch": "convnet:1x28x28-16-32-10",
                         "test_accuracy_first_2000": accuracy(m, xte[:2000], yte[:2000])},
            "inputs_from": "mnist t10k[0:8]"}
    return m, xte[:N_REF], None, meta


def training_meta(dataset, n, epochs, batch, lr, secs, acc):
    return {"training": {"data": dataset, "examples": f"train[0:{n}]", "epochs": epochs,
                         "batch": batch, "optimizer": f"Adam lr={lr}", "seed": SEED,
                         "seconds": round(secs, 1), "test_accuracy_first_2000": acc},
            "inputs_from": f"{dataset} test[0:{N_REF}]"}


BUILD = {"resnet20": build_resnet20, "vit": build_vit, "embmlp": build_embmlp,
         "convnet": build_convnet}
# (file name, opset) of each model's exports.
FILES = {"resnet20": [("resnet20", 17)], "vit": [("vit", 17), ("vit13", 13)],
         "embmlp": [("embmlp", 17)], "convnet": [("convnet", 17)]}


def name_map(model, path):
    """state_dict key -> initializer name in the ONNX file at path: the same name when the
    exporter kept it, else the initializer holding exactly the same values, else None
    (not exported, e.g. num_batches_tracked, which eval mode never reads)."""
    proto = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    out = {}
    for key, value in model.state_dict().items():
        v = value.numpy()
        if key in inits and np.array_equal(inits[key], v):
            out[key] = key
            continue
        same = [n for n, a in inits.items() if a.shape == v.shape and np.array_equal(a, v)]
        out[key] = same[0] if len(same) == 1 else None
    return out


def write_json(path, obj):
    """JSON with one top-level key per line and each row of a matrix on its own line;
    floats as Python's shortest round-trip repr, so float64 values are exact."""
    lines = []
    for key, value in obj.items():
        if isinstance(value, list) and value and isinstance(value[0], (list, dict)):
            body = "[\n" + ",\n".join("  " + json.dumps(v) for v in value) + "\n ]"
        else:
            body = json.dumps(value)
        lines.append(f" {json.dumps(key)}: {body}")
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


def retime(name, args):
    """--timing-only: the model rebuilt from its exported .onnx (initializers named as in
    names.json), checked against the ref's outputs, and only features_timing of its
    .ref.json files rewritten."""
    model, xs, pool, _ = BUILD[name](args)
    with open(os.path.join(args.out, "names.json")) as f:
        names = json.load(f)[name]
    proto = onnx.load(os.path.join(args.out, name + ".onnx"))
    inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in proto.graph.initializer}
    sd = {k: inits[v] for k, v in names.items() if v is not None}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        raise AssertionError(f"{name}: weights from the ONNX file: missing {missing}, unexpected {unexpected}")
    model.eval()
    model64 = copy.deepcopy(model).double()
    timing = features_timing(name, model, pool, xs[:2], jacobians(model64, xs[:2].double()))
    for fname, _ in FILES[name]:
        path = os.path.join(args.out, fname + ".ref.json")
        with open(path) as f:
            ref = json.load(f)
        with torch.no_grad():
            got = model64(torch.tensor(ref["inputs"], dtype=torch.float64).reshape(xs.shape))
        if not torch.equal(got, torch.tensor(ref["outputs"], dtype=torch.float64)):
            raise AssertionError(f"{name}: the ONNX weights do not reproduce {path}'s outputs")
        ref["features_timing"] = timing
        write_json(path, ref)
        print(f"{fname}: {timing['rows_per_s']} rows/s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mnist", required=True, help="directory of MNIST's *-ubyte.gz files")
    ap.add_argument("--fashion-mnist", required=True, help="directory of Fashion-MNIST's *-ubyte.gz files")
    ap.add_argument("--adult", required=True, help="directory holding adult.data and adult.test")
    ap.add_argument("--convnet-weights", required=True, help="cairn's mnist-convnet.safetensors")
    ap.add_argument("--out", required=True, help="output directory (entk/onnx/testdata)")
    ap.add_argument("--only", default=",".join(BUILD), help="comma-separated subset of " + ",".join(BUILD))
    ap.add_argument("--no-timing", action="store_true", help="skip the features_timing measurements")
    ap.add_argument("--timing-only", action="store_true",
                    help="only re-measure features_timing of existing files (resnet20, vit)")
    args = ap.parse_args()
    torch.set_num_threads(2)  # training's reduction order, hence the files, depend on it
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    names_path = os.path.join(args.out, "names.json")
    names = {}
    if os.path.exists(names_path):
        with open(names_path) as f:
            names = json.load(f)
    if args.timing_only:
        for name in args.only.split(","):
            if name in ("resnet20", "vit"):
                retime(name, args)
        return
    for name in args.only.split(","):
        start = time.perf_counter()
        model, xs, pool, meta = BUILD[name](args)
        meta["untied"] = untie(model, SEED)
        ref = js = None
        for fname, opset in FILES[name]:
            path = os.path.join(args.out, fname + ".onnx")
            export(model, xs[:1], path, opset)
            names[fname] = name_map(model, path)
            renamed = {k: v for k, v in names[fname].items()
                       if v != k and not k.endswith("num_batches_tracked")}
            if renamed:
                raise AssertionError(f"{fname}: the exporter renamed or merged {renamed}")
            if ref is None:
                ref, js = reference(name, model, xs, opset, meta)
                if pool is not None and not args.no_timing:
                    ref["features_timing"] = features_timing(name, model, pool, xs[:2], js[:2])
            ref = dict(ref, model=fname, onnx=fname + ".onnx", opset=opset)
            for p in ref["params"]:
                p["onnx_name"] = names[fname][p["name"]]
            write_json(os.path.join(args.out, fname + ".ref.json"), ref)
        print(f"{name}: {time.perf_counter() - start:.1f} s, {meta['training']}", flush=True)
    with open(names_path, "w") as f:
        json.dump(dict(sorted(names.items())), f, indent=1)
        f.write("\n")
    verify.main(args.out)


if __name__ == "__main__":
    main()
