package entk

import (
	"fmt"
	"math"

	"github.com/cairnhq/cairn/internal/base/rng"
)

// InitStream is the rng stream name of NewBackbone's parameter draw.
const InitStream = "entk/init"

// NewBackbone builds the architecture named by spec with PyTorch's default initialization,
// drawn from rng.New(seed, InitStream): every Linear and Conv2d weight is
// kaiming_uniform_(a=√5), i.e. U(−1/√fan_in, 1/√fan_in) (gain √(2/(1+5)) = 1/√3, bound
// √3·gain/√fan_in), and every bias U(−1/√fan_in, 1/√fan_in), fan_in = in_features or
// Cin·3·3. Tensors are drawn in state_dict order, each row-major, so the draw is fixed by
// (spec, seed).
func NewBackbone(spec string, seed uint64) (Backbone, error) {
	a, err := ParseArch(spec)
	if err != nil {
		return nil, err
	}
	r := rng.New(seed, InitStream)
	params := make([]float64, a.NumParams())
	ts := a.Tensors()
	for i := 0; i < len(ts); i += 2 {
		wt, bt := ts[i], ts[i+1]
		bound := 1 / math.Sqrt(float64(wt.fanIn()))
		for j := range wt.Size {
			params[wt.Offset+j] = (2*r.Float64() - 1) * bound
		}
		for j := range bt.Size {
			params[bt.Offset+j] = (2*r.Float64() - 1) * bound
		}
	}
	return newBackbone(a, params), nil
}

// FromParams builds the architecture spec around a copy of params (flattened in state_dict
// order, see Arch.Tensors).
func FromParams(spec string, params []float64) (Backbone, error) {
	a, err := ParseArch(spec)
	if err != nil {
		return nil, err
	}
	if len(params) != a.NumParams() {
		return nil, fmt.Errorf("%w: spec %q has %d parameters, got %d", ErrTensorShape, spec, a.NumParams(), len(params))
	}
	for i, v := range params {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: parameter %d is %v", ErrNotFinite, i, v)
		}
	}
	return newBackbone(a, append([]float64(nil), params...)), nil
}

// newBackbone wraps params (owned from now on) in the implementation of a.Kind.
func newBackbone(a Arch, params []float64) Backbone {
	switch a.Kind {
	case "mlp":
		return newMLP(a, params)
	case "resmlp":
		return newResMLP(a, params)
	case "convnet":
		return newConvNet(a, params)
	}
	panic("entk: unknown architecture kind " + a.Kind)
}
