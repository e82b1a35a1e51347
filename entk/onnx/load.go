package onnx

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// Supported versions of the default operator set ("" or "ai.onnx").
const (
	MinOpset = 13
	MaxOpset = 17
)

// DefaultMaxElements is Options.MaxElements when it is 0: 2^28 float64s (2 GiB).
const DefaultMaxElements = 1 << 28

// maxElementsCap bounds Options.MaxElements so that every index fits the int32 tables.
const maxElementsCap = 1 << 30

// Options are the choices Load makes beyond the file. The zero value selects every
// parameter, takes the input shape from the file and reads external data beside it.
type Options struct {
	// Params selects the kernel's parameters by initializer name: a parameter is in the
	// kernel when one of the globs matches its name (path.Match syntax, e.g. "layer3.*",
	// "fc.*"; '/' is an ordinary character here only if the glob has none). Empty means
	// every parameter. A malformed glob, or one that matches no parameter, is an error.
	Params []string
	// InputShape is the per-example input shape (without the batch dimension). It is
	// needed when the file leaves a dimension other than the batch symbolic, and must
	// agree with every dimension the file fixes.
	InputShape []int
	// Dir is the directory external data files are read from. Load defaults it to the
	// model file's directory; for LoadBytes it must be set if the model has external data.
	Dir string
	// MaxElements bounds the float64s of every tensor the model decodes, folds or keeps
	// per workspace (constants, activations, index tables), so that a hostile file cannot
	// make Load allocate without bound; 0 means DefaultMaxElements, and values above 2^30
	// count as 2^30.
	MaxElements int

	noSetters bool // tests: every gradient cleared first (parameters' when a pass starts) and added to, no setter asked
}

// Load reads the ONNX model at path (external data beside it unless opts.Dir says
// otherwise) and compiles it for one example at a time.
func Load(path string, opts Options) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	m, err := LoadBytes(data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// LoadBytes is Load for a model already in memory; data is not retained.
func LoadBytes(data []byte, opts Options) (*Model, error) {
	if opts.MaxElements <= 0 {
		opts.MaxElements = DefaultMaxElements
	}
	opts.MaxElements = min(opts.MaxElements, maxElementsCap)
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	opset, err := defaultOpset(&mp)
	if err != nil {
		return nil, err
	}
	g := mp.GetGraph()
	if g == nil {
		return nil, fmt.Errorf("%w: no graph", ErrModel)
	}
	if len(g.GetSparseInitializer()) > 0 {
		return nil, fmt.Errorf("%w: sparse initializers (%d)", ErrUnsupported, len(g.GetSparseInitializer()))
	}
	c := newCompiler(opts, opset)
	if err := c.readInitializers(g); err != nil {
		return nil, err
	}
	if err := c.readInput(g); err != nil {
		return nil, err
	}
	if err := c.findParams(g); err != nil {
		return nil, err
	}
	if err := c.run(g); err != nil {
		return nil, err
	}
	m, err := c.finish(g)
	if err != nil {
		return nil, err
	}
	m.digest = sha256.Sum256(data)
	m.indexIn = m.findIndexInputs()
	return m, nil
}

// defaultOpset returns the version of the default operator set mp imports.
func defaultOpset(mp *onnxpb.ModelProto) (int64, error) {
	v := int64(-1)
	for _, o := range mp.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			v = o.GetVersion()
		}
	}
	if v < 0 {
		return 0, fmt.Errorf("%w: the model imports no default (ai.onnx) operator set", ErrOpset)
	}
	if v < MinOpset || v > MaxOpset {
		return 0, fmt.Errorf("%w: default operator set version %d, want %d–%d (torch.onnx.export(..., opset_version=17))", ErrOpset, v, MinOpset, MaxOpset)
	}
	return v, nil
}

// readInitializers decodes every initializer into a constant value (findParams later
// turns the selected parameters into parameter slots).
func (c *compiler) readInitializers(g *onnxpb.GraphProto) error {
	for _, t := range g.GetInitializer() {
		name := t.GetName()
		if name == "" {
			return fmt.Errorf("%w: an initializer has no name", ErrModel)
		}
		if _, dup := c.vals[name]; dup {
			return fmt.Errorf("%w: initializer %q defined twice", ErrModel, name)
		}
		tt, err := decodeTensor(t, c.opts.Dir, c.budget)
		if err != nil {
			return err
		}
		if err := c.spend(len(tt.data), "initializer "+name); err != nil {
			return err
		}
		c.vals[name] = &value{name: name, dt: tt.dt, shape: tt.shape, c: tt.data, slot: -1}
		c.inits = append(c.inits, name)
	}
	return nil
}

// readInput finds the one graph input that is not an initializer and fixes its shape:
// [1, per-example shape…], the batch dimension 1 or symbolic.
func (c *compiler) readInput(g *onnxpb.GraphProto) error {
	var in *onnxpb.ValueInfoProto
	for _, vi := range g.GetInput() {
		if _, isInit := c.vals[vi.GetName()]; isInit {
			continue
		}
		if in != nil {
			return fmt.Errorf("%w: graph inputs %q and %q: want exactly one", ErrUnsupported, in.GetName(), vi.GetName())
		}
		in = vi
	}
	if in == nil || in.GetName() == "" {
		return fmt.Errorf("%w: the graph has no input", ErrModel)
	}
	tt := in.GetType().GetTensorType()
	if dt, ok := dtypeOf(tt.GetElemType()); !ok || dt != dtFloat {
		return fmt.Errorf("%w: input %q has element type %v, want a float type", ErrUnsupported, in.GetName(), onnxpb.TensorProto_DataType(tt.GetElemType()))
	}
	dims := tt.GetShape().GetDim()
	if len(dims) < 1 {
		return fmt.Errorf("%w: input %q has no batch dimension (rank %d)", ErrShape, in.GetName(), len(dims))
	}
	if v, ok := dims[0].GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue); ok && v.DimValue != 1 {
		return fmt.Errorf("%w: input %q has batch dimension %d: export with batch 1 or a dynamic batch axis", ErrShape, in.GetName(), v.DimValue)
	}
	per := make([]int, len(dims)-1)
	for i, d := range dims[1:] {
		v, ok := d.GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue)
		switch {
		case ok && v.DimValue <= 0:
			return fmt.Errorf("%w: input %q dimension %d is %d", ErrShape, in.GetName(), i+1, v.DimValue)
		case ok:
			per[i] = int(min(v.DimValue, int64(c.budget)+1))
		case i >= len(c.opts.InputShape):
			return fmt.Errorf("%w: input %q dimension %d is symbolic (%q): set Options.InputShape", ErrShape, in.GetName(), i+1, d.GetDimParam())
		}
	}
	if s := c.opts.InputShape; s != nil {
		if len(s) != len(per) {
			return fmt.Errorf("%w: Options.InputShape %v has rank %d, input %q has %d dimensions after the batch", ErrShape, s, len(s), in.GetName(), len(per))
		}
		for i, v := range s {
			if v <= 0 || per[i] != 0 && per[i] != v {
				return fmt.Errorf("%w: Options.InputShape %v: dimension %d is %d, the file says %d", ErrShape, s, i, v, per[i])
			}
			per[i] = v
		}
	}
	shape := append([]int{1}, per...)
	n, err := checkedNumel(ints64(shape), c.budget)
	if err != nil {
		return fmt.Errorf("%w: input %q: %v", ErrShape, in.GetName(), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: input %q has no elements (shape %v)", ErrShape, in.GetName(), per)
	}
	c.inShape = per
	c.inName = in.GetName()
	v := &value{name: in.GetName(), dt: dtFloat, shape: shape, slot: c.newSlot(slot{kind: slotAct, dt: dtFloat, size: n})}
	c.vals[in.GetName()] = v
	c.inSlot = v.slot
	return c.spend(n, "input")
}

// ints64 converts a shape to int64 dims.
func ints64(s []int) []int64 {
	r := make([]int64, len(s))
	for i, v := range s {
		r[i] = int64(v)
	}
	return r
}
