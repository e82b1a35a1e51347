"""Readers for the data sets make.py trains on, and for cairn's shipped safetensors.

Images come out as float32 pixel/255 in (N, 1, 28, 28), as cairn's loaders give
them (rounded to float32, so every value is exactly float32-representable). Adult
comes out as the embmlp encoding described on adult().
"""

import gzip
import json
import os
import struct

import numpy as np
import torch


def idx(path):
    """One idx file (gzipped or not) as a numpy array of its stored dtype (uint8)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte idx file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {arr.size} bytes of data, header says {dims}")
    return arr.reshape(dims)


def images(directory, split):
    """(x, y) of MNIST-format idx files in directory: x float32 (N, 1, 28, 28) in
    [0, 1], y int64 (N,). split is "train" or "t10k"."""
    def find(kind):
        for suffix in (".gz", ""):
            p = os.path.join(directory, f"{split}-{kind}-idx{3 if kind == 'images' else 1}-ubyte{suffix}")
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"no {split} {kind} idx file in {directory}")
    x = idx(find("images")).astype(np.float32) / np.float32(255)
    y = idx(find("labels")).astype(np.int64)
    return torch.from_numpy(x[:, None, :, :].copy()), torch.from_numpy(y)


ADULT_NUMERIC = (0, 2, 4, 10, 11, 12)
ADULT_CATEGORICAL = (1, 3, 5, 6, 7, 8, 9, 13)


def _adult_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("|"):
                continue
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 15:
                raise ValueError(f"{path}: {len(parts)} fields, want 15: {line!r}")
            rows.append(parts)
    return rows


def adult(directory):
    """UCI Adult as (xtrain, ytrain, xtest, ytest, cardinalities), x float32 (N, 14):
    the six numeric columns (file order) standardized with the train file's mean and
    population standard deviation, then the eight categorical columns (file order),
    each as the integer index of its value among the train file's values in sorted
    byte order ("?" is a category of its own, as in cairn's one-hot encoding; a value
    seen only in the test file would be an error). The standardized values are
    rounded to float32 like everything else the models see."""
    train = _adult_rows(os.path.join(directory, "adult.data"))
    test = _adult_rows(os.path.join(directory, "adult.test"))
    num = np.array([[float(r[j]) for j in ADULT_NUMERIC] for r in train])
    mean, std = num.mean(0), num.std(0)
    cats = [sorted({r[j] for r in train}, key=lambda s: s.encode()) for j in ADULT_CATEGORICAL]
    index = [{v: i for i, v in enumerate(c)} for c in cats]

    def encode(rows):
        x = np.empty((len(rows), len(ADULT_NUMERIC) + len(ADULT_CATEGORICAL)), np.float32)
        for i, r in enumerate(rows):
            x[i, :6] = (np.array([float(r[j]) for j in ADULT_NUMERIC]) - mean) / std
            x[i, 6:] = [index[k][r[j]] for k, j in enumerate(ADULT_CATEGORICAL)]
        y = np.array([1 if r[14].rstrip(".") == ">50K" else 0 for r in rows], np.int64)
        return torch.from_numpy(x), torch.from_numpy(y)

    xtr, ytr = encode(train)
    xte, yte = encode(test)
    return xtr, ytr, xte, yte, [len(c) for c in cats]


def safetensors(path):
    """A safetensors file as an ordered dict of float32 torch tensors (F32 and F64
    only: the dtypes cairn writes), in the file's key order."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for key, meta in header.items():
        dtype = {"F32": np.float32, "F64": np.float64}[meta["dtype"]]
        lo, hi = meta["data_offsets"]
        arr = np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=np.dtype(dtype).newbyteorder("<"))
        arr32 = arr.astype(np.float32)
        if not np.array_equal(arr32.astype(arr.dtype), arr):
            raise ValueError(f"{path}: {key} is not exactly float32")
        out[key] = torch.from_numpy(arr32.reshape(meta["shape"]))
    return out
