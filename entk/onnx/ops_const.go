package onnx

import (
	"math"

	"github.com/cairnhq/cairn/entk/onnx/onnxpb"
)

// constOut returns the spec of a constant output, spending its size from the budget.
func (x *nodeCtx) constOut(dt dtype, shape []int, data []float64) ([]outSpec, kernel, error) {
	if err := x.c.spend(len(data), "constant"); err != nil {
		return nil, nil, err
	}
	return []outSpec{{dt: dt, shape: shape, c: data}}, nil, nil
}

func opConstant(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(0, 0, "value", "value_float", "value_floats", "value_int", "value_ints"); err != nil {
		return nil, nil, err
	}
	if len(x.n.GetAttribute()) != 1 {
		return nil, nil, errf(ErrModel, "Constant needs exactly one value attribute, has %d", len(x.n.GetAttribute()))
	}
	a := x.n.GetAttribute()[0]
	want := map[string]onnxpb.AttributeProto_AttributeType{
		"value": onnxpb.AttributeProto_TENSOR, "value_float": onnxpb.AttributeProto_FLOAT,
		"value_floats": onnxpb.AttributeProto_FLOATS, "value_int": onnxpb.AttributeProto_INT,
		"value_ints": onnxpb.AttributeProto_INTS,
	}[a.GetName()]
	if a.GetType() != want {
		return nil, nil, errf(ErrModel, "attribute %s has type %v, want %v", a.GetName(), a.GetType(), want)
	}
	switch a.GetName() {
	case "value":
		t, err := decodeTensor(a.GetT(), "", x.c.budget)
		if err != nil {
			return nil, nil, err
		}
		return x.constOut(t.dt, t.shape, t.data)
	case "value_float":
		return x.constOut(dtFloat, nil, []float64{float64(a.GetF())})
	case "value_int":
		return x.constOut(dtInt, nil, []float64{float64(a.GetI())})
	case "value_floats":
		d := make([]float64, len(a.GetFloats()))
		for i, f := range a.GetFloats() {
			d[i] = float64(f)
		}
		return x.constOut(dtFloat, []int{len(d)}, d)
	}
	d := make([]float64, len(a.GetInts()))
	for i, v := range a.GetInts() {
		d[i] = float64(v)
	}
	return x.constOut(dtInt, []int{len(d)}, d)
}

// opShape: the static shape (the batch dimension is 1), always a constant.
func opShape(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "start", "end"); err != nil {
		return nil, nil, err
	}
	shape := x.in[0].shape
	r := int64(len(shape))
	start, err := x.attrInt("start", 0)
	if err != nil {
		return nil, nil, err
	}
	end, err := x.attrInt("end", r)
	if err != nil {
		return nil, nil, err
	}
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	d := make([]float64, 0, max(end-start, 0))
	for i := start; i < end; i++ {
		d = append(d, float64(shape[i]))
	}
	return x.constOut(dtInt, []int{len(d)}, d)
}

func opSize(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1); err != nil {
		return nil, nil, err
	}
	return x.constOut(dtInt, nil, []float64{float64(numel(x.in[0].shape))})
}

func opConstantOfShape(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(1, 1, "value"); err != nil {
		return nil, nil, err
	}
	spec, err := x.constInts(0, "shape")
	if err != nil {
		return nil, nil, err
	}
	n, err := checkedNumel(spec, x.c.budget)
	if err != nil {
		return nil, nil, errf(ErrShape, "ConstantOfShape: %v", err)
	}
	dt, fill := dtFloat, 0.0
	a, err := x.attr("value", onnxpb.AttributeProto_TENSOR)
	if err != nil {
		return nil, nil, err
	}
	if a != nil {
		t, err := decodeTensor(a.GetT(), "", 1)
		if err != nil || len(t.data) != 1 {
			return nil, nil, errf(ErrModel, "ConstantOfShape value must be one element")
		}
		dt, fill = t.dt, t.data[0]
	}
	shape := make([]int, len(spec))
	for i, v := range spec {
		shape[i] = int(v)
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = fill
	}
	return x.constOut(dt, shape, d)
}

func opRange(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(3, 3); err != nil {
		return nil, nil, err
	}
	var s [3]float64
	for i, v := range x.in {
		if v.c == nil || len(v.c) != 1 {
			return nil, nil, errf(ErrUnsupported, "Range input %d must be a constant scalar", i)
		}
		s[i] = v.c[0]
	}
	n := math.Ceil((s[1] - s[0]) / s[2])
	if !(n <= float64(x.c.budget)) {
		return nil, nil, errf(ErrShape, "Range(%v, %v, %v) is too long", s[0], s[1], s[2])
	}
	cnt := int(max(n, 0))
	d := make([]float64, cnt)
	for i := range d {
		d[i] = s[0] + float64(i)*s[2]
	}
	return x.constOut(x.in[0].dt, []int{cnt}, d)
}

// opEqual: y = [a == b] with broadcasting; no gradient.
func opEqual(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(2, 2); err != nil {
		return nil, nil, err
	}
	return x.select3(false)
}

// opWhere: y = cond ? a : b with broadcasting; the gradient goes to the chosen operand.
func opWhere(x *nodeCtx) ([]outSpec, kernel, error) {
	if err := x.check(3, 3); err != nil {
		return nil, nil, err
	}
	if x.in[1].dt != x.in[2].dt {
		return nil, nil, errf(ErrModel, "Where operands of types %v and %v", x.in[1].dt, x.in[2].dt)
	}
	return x.select3(true)
}

// select3 compiles Equal (where = false) and Where over broadcast inputs.
func (x *nodeCtx) select3(where bool) ([]outSpec, kernel, error) {
	shapes := make([][]int, len(x.in))
	for i, v := range x.in {
		shapes[i] = v.shape
	}
	shape, ok := broadcastShapes(shapes...)
	if !ok {
		return nil, nil, errf(ErrShape, "shapes %v do not broadcast", shapes)
	}
	k := &selectKernel{n: numel(shape), where: where}
	for _, s := range shapes {
		m := bcastMap(s, shape)
		if err := x.c.spend(len(m)/2, "broadcast map"); err != nil {
			return nil, nil, err
		}
		k.maps = append(k.maps, m)
	}
	dt := dtInt
	if where {
		dt = x.in[1].dt
	}
	return []outSpec{{dt: dt, shape: shape}}, k, nil
}

// selectKernel is Equal (y = [a == b]) or Where (y = c ≠ 0 ? a : b).
type selectKernel struct {
	n     int
	maps  [][]int32
	where bool
}

func (k *selectKernel) scratch() int { return 0 }

func (k *selectKernel) forward(out, in [][]float64, _ []float64) {
	y := out[0][:k.n]
	for i := range y {
		a := in[0][at(k.maps[0], i)]
		b := in[1][at(k.maps[1], i)]
		switch {
		case !k.where && a == b:
			y[i] = 1
		case !k.where:
			y[i] = 0
		case a != 0:
			y[i] = b
		default:
			y[i] = in[2][at(k.maps[2], i)]
		}
	}
}

func (k *selectKernel) backward(gin, gout, in, _ [][]float64, _ []float64) {
	if !k.where {
		return
	}
	g := gout[0][:k.n]
	for i, gi := range g {
		j := 1
		if in[0][at(k.maps[0], i)] == 0 {
			j = 2
		}
		if gin[j] != nil {
			gin[j][at(k.maps[j], i)] += gi
		}
	}
}
