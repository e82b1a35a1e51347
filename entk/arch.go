package entk

import (
	"fmt"
	"strconv"
	"strings"
)

// Architecture specs. A spec string names a network family and its sizes:
//
//	mlp:784-256-256-10       Linear(784,256) ReLU Linear(256,256) ReLU Linear(256,10)
//	resmlp:108-128x3-8       Linear(108,128) ReLU, 3 blocks h + fc2(relu(fc1(h))), Linear(128,8)
//	convnet:1x28x28-16-32-10 [Conv2d(3x3, pad 1) ReLU MaxPool2d(2)] per channel count,
//	                         Flatten, Linear(·,10)
//
// The PyTorch modules whose state_dict matches our parameter order (and LoadBackbone's keys)
// are:
//
//	# mlp:784-256-256-10  → keys 0.weight, 0.bias, 2.weight, 2.bias, 4.weight, 4.bias
//	mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
//	                    nn.Linear(256, 10))
//
//	# resmlp:108-128x3-8 → keys inp.*, blocks.{i}.fc1.*, blocks.{i}.fc2.*, out.*
//	class Block(nn.Module):
//	    def __init__(self, width):
//	        super().__init__()
//	        self.fc1 = nn.Linear(width, width)
//	        self.fc2 = nn.Linear(width, width)
//	    def forward(self, h):
//	        return h + self.fc2(torch.relu(self.fc1(h)))
//	class ResMLP(nn.Module):
//	    def __init__(self, d_in, width, n_blocks, d_out):
//	        super().__init__()
//	        self.inp = nn.Linear(d_in, width)
//	        self.blocks = nn.ModuleList([Block(width) for _ in range(n_blocks)])
//	        self.out = nn.Linear(width, d_out)
//	    def forward(self, x):
//	        h = torch.relu(self.inp(x))
//	        for b in self.blocks:
//	            h = b(h)
//	        return self.out(h)
//	resmlp = ResMLP(108, 128, 3, 8)
//
//	# convnet:1x28x28-16-32-10 → keys 0.*, 3.*, 7.*  (conv i at index 3i, the Linear last)
//	convnet = nn.Sequential(
//	    nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
//	    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
//	    nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
//
// Choices fixed here: the resmlp input projection is followed by a ReLU (so the residual
// stream starts non-negative, as in the common pre-activation-free ResMLP); MaxPool2d(2)
// floors odd spatial sizes exactly as PyTorch (the last row/column is dropped), so a conv
// layer with input H×W produces ⌊H/2⌋×⌊W/2⌋ and a spec whose spatial size would reach 0 is
// rejected. Inputs are flattened row-major (C, H, W), as x.reshape(-1) in PyTorch.

// maxDim bounds every number in a spec and maxParams the parameter count, so that a spec
// from a config file cannot request an absurd allocation.
const (
	maxDim    = 1 << 20
	maxParams = 1 << 28
)

// Arch is a parsed architecture spec. Exactly the fields of its Kind are set.
type Arch struct {
	Spec string // the spec string as given
	Kind string // "mlp", "resmlp" or "convnet"
	In   int    // D, the input length (C·H·W for convnet)
	Out  int    // d, the number of outputs

	// mlp: widths of the hidden layers, in order (may be empty: a single Linear).
	Hidden []int

	// resmlp: residual stream width and number of residual blocks.
	Width, Blocks int

	// convnet: input channels and spatial size, and the output channels of each conv layer.
	C, H, W  int
	Channels []int
}

// ParamTensor is one parameter tensor of an architecture: its PyTorch state_dict key, shape,
// and position in the flattened parameter vector.
type ParamTensor struct {
	Name   string
	Shape  []int
	Offset int // index of the first element in Params()
	Size   int // product of Shape
}

// ParseArch parses an architecture spec such as "mlp:784-256-256-10",
// "resmlp:108-128x3-8" or "convnet:1x28x28-16-32-10".
func ParseArch(spec string) (Arch, error) {
	kind, body, ok := strings.Cut(spec, ":")
	if !ok {
		return Arch{}, fmt.Errorf("%w %q: want kind:sizes, e.g. mlp:784-256-10", ErrArchSpec, spec)
	}
	parts := strings.Split(body, "-")
	a := Arch{Spec: spec, Kind: kind}
	switch kind {
	case "mlp":
		if len(parts) < 2 {
			return Arch{}, fmt.Errorf("%w %q: mlp needs at least input and output sizes, got %d part(s)", ErrArchSpec, spec, len(parts))
		}
		ns := make([]int, len(parts))
		for i, p := range parts {
			n, err := parseDim(spec, p)
			if err != nil {
				return Arch{}, err
			}
			ns[i] = n
		}
		a.In, a.Out = ns[0], ns[len(ns)-1]
		a.Hidden = ns[1 : len(ns)-1]
	case "resmlp":
		if len(parts) != 3 {
			return Arch{}, fmt.Errorf("%w %q: resmlp wants in-WIDTHxBLOCKS-out, got %d part(s)", ErrArchSpec, spec, len(parts))
		}
		in, err := parseDim(spec, parts[0])
		if err != nil {
			return Arch{}, err
		}
		ws, bs, ok := strings.Cut(parts[1], "x")
		if !ok {
			return Arch{}, fmt.Errorf("%w %q: part %q: want WIDTHxBLOCKS, e.g. 128x3", ErrArchSpec, spec, parts[1])
		}
		width, err := parseDim(spec, ws)
		if err != nil {
			return Arch{}, err
		}
		blocks, err := parseCount(spec, bs)
		if err != nil {
			return Arch{}, err
		}
		out, err := parseDim(spec, parts[2])
		if err != nil {
			return Arch{}, err
		}
		a.In, a.Width, a.Blocks, a.Out = in, width, blocks, out
	case "convnet":
		if len(parts) < 3 {
			return Arch{}, fmt.Errorf("%w %q: convnet wants CxHxW-channels...-out with at least one conv layer, got %d part(s)", ErrArchSpec, spec, len(parts))
		}
		dims := strings.Split(parts[0], "x")
		if len(dims) != 3 {
			return Arch{}, fmt.Errorf("%w %q: input part %q: want CxHxW, e.g. 1x28x28", ErrArchSpec, spec, parts[0])
		}
		var chw [3]int
		for i, p := range dims {
			n, err := parseDim(spec, p)
			if err != nil {
				return Arch{}, err
			}
			chw[i] = n
		}
		a.C, a.H, a.W = chw[0], chw[1], chw[2]
		if a.C*a.H > maxDim || a.C*a.H*a.W > maxDim {
			return Arch{}, fmt.Errorf("%w %q: input %s has more than %d values", ErrArchSpec, spec, parts[0], maxDim)
		}
		a.In = a.C * a.H * a.W
		h, w := a.H, a.W
		for _, p := range parts[1 : len(parts)-1] {
			n, err := parseDim(spec, p)
			if err != nil {
				return Arch{}, err
			}
			if h/2 < 1 || w/2 < 1 {
				return Arch{}, fmt.Errorf("%w %q: conv layer %q gets spatial size %dx%d, which MaxPool2d(2) reduces to %dx%d", ErrArchSpec, spec, p, h, w, h/2, w/2)
			}
			h, w = h/2, w/2
			a.Channels = append(a.Channels, n)
		}
		out, err := parseDim(spec, parts[len(parts)-1])
		if err != nil {
			return Arch{}, err
		}
		a.Out = out
	default:
		return Arch{}, fmt.Errorf("%w %q: unknown kind %q (want mlp, resmlp or convnet)", ErrArchSpec, spec, kind)
	}
	if p := a.numParams(); p > maxParams {
		return Arch{}, fmt.Errorf("%w %q: %d parameters, more than the limit %d", ErrArchSpec, spec, p, maxParams)
	}
	return a, nil
}

// parseDim parses a positive size written in plain decimal digits.
func parseDim(spec, s string) (int, error) {
	n, err := parseCount(spec, s)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("%w %q: size %q must be positive", ErrArchSpec, spec, s)
	}
	return n, nil
}

// parseCount parses a non-negative count written in plain decimal digits (no sign, no
// spaces), at most maxDim.
func parseCount(spec, s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w %q: empty size (doubled or trailing separator?)", ErrArchSpec, spec)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%w %q: size %q is not a decimal number", ErrArchSpec, spec, s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxDim {
		return 0, fmt.Errorf("%w %q: size %q exceeds the limit %d", ErrArchSpec, spec, s, maxDim)
	}
	return n, nil
}

// numParams counts parameters in int64-safe arithmetic (every factor is ≤ maxDim = 2^20, so
// each product of two fits easily in 64 bits).
func (a Arch) numParams() int {
	p := 0
	for _, t := range a.Tensors() {
		p += t.Size
	}
	return p
}

// NumParams is P, the number of parameters.
func (a Arch) NumParams() int { return a.numParams() }

// linearTensors appends the weight [out,in] and bias [out] of a Linear named prefix.
func linearTensors(ts []ParamTensor, prefix string, in, out int) []ParamTensor {
	return append(ts,
		ParamTensor{Name: prefix + "weight", Shape: []int{out, in}, Size: out * in},
		ParamTensor{Name: prefix + "bias", Shape: []int{out}, Size: out})
}

// Tensors lists the parameter tensors in PyTorch state_dict order, which is also the order
// of the flattened parameter vector (each tensor row-major).
func (a Arch) Tensors() []ParamTensor {
	var ts []ParamTensor
	switch a.Kind {
	case "mlp":
		widths := append(append([]int{a.In}, a.Hidden...), a.Out)
		for l := 0; l+1 < len(widths); l++ {
			ts = linearTensors(ts, strconv.Itoa(2*l)+".", widths[l], widths[l+1])
		}
	case "resmlp":
		ts = linearTensors(ts, "inp.", a.In, a.Width)
		for k := 0; k < a.Blocks; k++ {
			p := "blocks." + strconv.Itoa(k) + "."
			ts = linearTensors(ts, p+"fc1.", a.Width, a.Width)
			ts = linearTensors(ts, p+"fc2.", a.Width, a.Width)
		}
		ts = linearTensors(ts, "out.", a.Width, a.Out)
	case "convnet":
		cin, h, w := a.C, a.H, a.W
		for l, cout := range a.Channels {
			p := strconv.Itoa(3*l) + "."
			ts = append(ts,
				ParamTensor{Name: p + "weight", Shape: []int{cout, cin, 3, 3}, Size: cout * cin * 9},
				ParamTensor{Name: p + "bias", Shape: []int{cout}, Size: cout})
			cin, h, w = cout, h/2, w/2
		}
		ts = linearTensors(ts, strconv.Itoa(3*len(a.Channels)+1)+".", cin*h*w, a.Out)
	}
	off := 0
	for i := range ts {
		ts[i].Offset = off
		off += ts[i].Size
	}
	return ts
}

// fanIn is the PyTorch fan-in of a weight tensor: shape[1] times the kernel area.
func (t ParamTensor) fanIn() int {
	f := 1
	for _, s := range t.Shape[1:] {
		f *= s
	}
	return f
}
