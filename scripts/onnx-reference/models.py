"""The reference modules exported by make.py.

Every module takes a float32 batch (N, *input_shape) and returns (N, d). Their
state_dict keys are what the ONNX initializers are named after (names.json in the
output directory records the mapping, which is the identity unless the exporter
renamed something).
"""

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

# Every constant of these modules is a float32 value, because the ONNX files store
# constants and attributes (epsilons, the attention scale, GELU's sqrt(2)) as float32:
# then the float64 module that make.py takes the reference values from and the ONNX
# graph evaluated in float64 are the same function, and agree to rounding (1e-14)
# instead of to a float32 rounding of a constant (1e-8).
EPS = float(np.float32(1e-5))
SQRT2 = float(np.float32(2 ** 0.5))


def f32(v):
    """v rounded to the nearest float32, as a Python float."""
    return float(np.float32(v))


def gelu(x):
    """The exact (erf) GELU, 0.5 x (1 + erf(x / sqrt 2)), written out with sqrt 2 rounded
    to float32; it exports to the same node types as F.gelu (Div, Erf, Add, Mul)."""
    return x * 0.5 * (1 + torch.erf(x / SQRT2))


class BasicBlock(nn.Module):
    """The CIFAR ResNet basic block (He et al. 2016, sec. 4.2): two 3x3 convs with
    BatchNorm, and a 1x1-conv + BatchNorm shortcut (option B) where the shape
    changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=EPS)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=EPS)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout, eps=EPS))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet20(nn.Module):
    """ResNet-20 for 1x28x28 inputs: a 3x3 conv to 16 channels, three stages of three
    basic blocks (16, 32, 64 channels; 28, 14, 7 pixels), global average pooling and
    a Linear head."""

    def __init__(self, channels=1, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16, eps=EPS)
        stages, cin = [], 16
        for i, cout in enumerate((16, 32, 64)):
            blocks = []
            for j in range(3):
                blocks.append(BasicBlock(cin, cout, 2 if (i > 0 and j == 0) else 1))
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.layer3(self.layer2(self.layer1(y)))
        return self.fc(torch.flatten(self.pool(y), 1))


class Attention(nn.Module):
    """Multi-head self-attention written out (one qkv Linear, scaled dot products,
    softmax, an output Linear) rather than nn.MultiheadAttention, whose eval-mode
    fast path does not export and whose packed in_proj names are less plain."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.scale = f32(self.dh ** -0.5)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, dim = x.shape[1], x.shape[2]
        qkv = self.qkv(x).reshape(-1, n, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        y = torch.matmul(a, v).transpose(1, 2).reshape(-1, n, dim)
        return self.proj(y)


class Block(nn.Module):
    """A pre-norm transformer block: x + attn(LN(x)), then x + MLP(LN(x)) with GELU."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=EPS)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=EPS)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """A small ViT (Dosovitskiy et al. 2021) for 1x28x28: 7x7 patches by a strided
    Conv, a class token, learned position embeddings, pre-norm blocks, a final
    LayerNorm and a Linear head on the class token."""

    def __init__(self, channels=1, size=28, patch=7, dim=48, depth=2, heads=4, hidden=96,
                 classes=10):
        super().__init__()
        tokens = (size // patch) ** 2 + 1
        self.patch = nn.Conv2d(channels, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, tokens, dim))
        nn.init.trunc_normal_(self.pos, std=0.02)
        nn.init.trunc_normal_(self.cls, std=0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=EPS)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        y = self.patch(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.cls.expand(y.shape[0], -1, -1), y], dim=1) + self.pos
        y = self.norm(self.blocks(y))
        return self.head(y[:, 0])


class EmbMLP(nn.Module):
    """An MLP for UCI Adult: the first `numeric` inputs are standardized numbers, each
    following input is one categorical column's integer code (as a float), looked up
    in that column's nn.Embedding; everything is concatenated, then
    Linear-ReLU-Linear."""

    def __init__(self, numeric, cardinalities, emb=4, hidden=64, classes=2):
        super().__init__()
        self.numeric = numeric
        self.emb = nn.ModuleList([nn.Embedding(c, emb) for c in cardinalities])
        self.fc1 = nn.Linear(numeric + emb * len(cardinalities), hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        codes = x[:, self.numeric:].long()
        parts = [x[:, :self.numeric]] + [e(codes[:, k]) for k, e in enumerate(self.emb)]
        return self.fc2(F.relu(self.fc1(torch.cat(parts, dim=1))))


def convnet():
    """cairn's convnet:1x28x28-16-32-10 exactly as documented on entk.Arch: keys 0.*,
    3.*, 7.* of this Sequential."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
