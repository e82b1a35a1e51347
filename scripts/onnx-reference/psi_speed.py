#!/usr/bin/python3
"""ψ speed of cairn's ONNX backbone against a PyTorch featurizer, in one run: rounds
that alternate the Go benchmark (BenchmarkONNXFeatures/NAME of a compiled entk test
binary: FeaturesBatchTo on GOMAXPROCS goroutines, h = 4, s = 1024, float64, 32 examples
a call) with make.py's featurizer (functorch.vjp per example, vmapped over the 4 heads
and a batch of 8; the SRHT to s = 1024 by a butterfly FWHT; float32 on 2 threads), on
the model rebuilt from the .onnx file's initializers, so both see the same load.

    python3 psi_speed.py ENTK_TEST_BINARY ENTK_DIR ROUNDS NAME:IMAGES_DIR ...

NAME is resnet20 or vit (files in ENTK_DIR/onnx/testdata), IMAGES_DIR the idx directory
of its data (Fashion-MNIST for resnet20, MNIST for vit; make.py's timing inputs, test
images 8 to 55). Prints JSON: per model and round, Go's examples/s and PyTorch's rows/s
(each a wall-clock rate of its own part of the round) and their ratio, and the same per
CPU-second of each process (both use two threads; on a shared machine the CPU rates
move far less with the load than the wall-clock ones); the median ratios. With the
environment variable PSI_SPEED_BASE naming a second entk test binary (an older revision,
scripts/onnx-psi-speed's BASE), each round also runs its benchmark, just before the
current one, and reports its rates and ratios as base_*, so before and after come from
the same run.
"""

import copy
import json
import os
import re
import statistics
import subprocess
import sys

import torch

import daemon_check
import data
import make


def go_rate(binary, entk_dir, name):
    """Examples/s, examples per CPU-second (the process's, over the ψ calls only) and the
    benchmark's own ratio to one VJP, of one run of BenchmarkONNXFeatures/NAME
    (benchtime 2x: 64 examples after a 32-example warm-up)."""
    out = subprocess.run([binary, "-test.run", "NONE", "-test.bench", f"^BenchmarkONNXFeatures$/^{name}$",
                          "-test.benchtime", "2x"], cwd=entk_dir, check=True, capture_output=True, text=True).stdout
    got = [re.search(r"([0-9.]+) " + re.escape(unit) + r"(\s|$)", out) for unit in ("examples/s", "examples/cpu-s", "x_vjp")]
    if not all(got):
        raise AssertionError(f"no examples/s, examples/cpu-s or x_vjp in the benchmark's output:\n{out}")
    return [float(m.group(1)) for m in got]


def torch_setup(entk_dir, name, images):
    model64, _ = daemon_check.build(os.path.join(entk_dir, "onnx", "testdata", name + ".onnx"))
    model = copy.deepcopy(model64).float().eval()  # Module.float() works in place
    xte, _ = data.images(images, "t10k")
    xs, pool = xte[:make.N_REF], xte[make.N_REF:make.N_REF + 48]
    js = make.jacobians(model64, xs[:2].double())
    return model, pool, xs[:2], js


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    binary, entk_dir, rounds = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    base = os.path.abspath(os.environ["PSI_SPEED_BASE"]) if os.environ.get("PSI_SPEED_BASE") else None
    report = {"load_average_start": [round(v, 2) for v in os.getloadavg()], "models": {}}
    for spec in sys.argv[4:]:
        name, images = spec.split(":", 1)
        model, pool, xcheck, js = torch_setup(entk_dir, name, images)
        runs = []
        for _ in range(rounds):
            base_run = go_rate(base, entk_dir, name) if base else None
            go, go_cpu, x_vjp = go_rate(binary, entk_dir, name)
            t = make.features_timing(name, model, pool, xcheck, js, reps=1)
            runs.append({"go_examples_per_s": go, "go_examples_per_cpu_s": go_cpu, "go_x_vjp": x_vjp,
                         "torch_rows_per_s": t["rows_per_s"], "torch_rows_per_cpu_s": t["rows_per_cpu_s"],
                         "ratio": round(go / t["rows_per_s"], 2), "cpu_ratio": round(go_cpu / t["rows_per_cpu_s"], 2),
                         "load_average": t["load_average"]})
            if base_run:
                runs[-1].update({"base_examples_per_s": base_run[0], "base_examples_per_cpu_s": base_run[1],
                                 "base_ratio": round(base_run[0] / t["rows_per_s"], 2),
                                 "base_cpu_ratio": round(base_run[1] / t["rows_per_cpu_s"], 2)})
            print(json.dumps({name: runs[-1]}), file=sys.stderr, flush=True)
        report["models"][name] = {"P": t["P"], "P_padded": t["P_padded"], "heads": t["heads"], "s": t["s"],
                                  "median_ratio": statistics.median(r["ratio"] for r in runs),
                                  "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in runs), "rounds": runs}
        if base:
            report["models"][name]["base_median_ratio"] = statistics.median(r["base_ratio"] for r in runs)
            report["models"][name]["base_median_cpu_ratio"] = statistics.median(r["base_cpu_ratio"] for r in runs)
    report["torch_version"] = torch.__version__
    report["torch_method"] = t["method"]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
