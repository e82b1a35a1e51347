package fit_test

import (
	"fmt"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/fit"
)

// Example fits a tiny encoder from the dense PCI initialization and prints how the
// checkpoint was chosen (no validation labels and no second validation view: the final
// epoch is kept).
func Example() {
	n, m := 8, 3
	ka, kb := mat.NewDense(n, m, nil), mat.NewDense(n, m, nil)
	var ids []string
	for i := range n {
		for l := range m {
			ka.Set(i, l, float64((i+l)%4)/4)
			kb.Set(i, l, float64((i+2*l)%4)/4)
		}
		ids = append(ids, "p"+strconv.Itoa(i))
	}
	kmm := mat.NewDense(m, m, []float64{1, 0.5, 0.2, 0.5, 1, 0.3, 0.2, 0.3, 1})
	p := &fit.Problem{KA: ka, KB: kb, IDs: ids, Kmm: kmm}
	in, err := fit.Initialize(fit.PCI, p, 2, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	opt := fit.DefaultOptions(fit.VICReg)
	opt.Epochs = 2
	res, err := fit.Adam(p, in.A0, opt)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.SelectedBy, res.Epochs, len(res.Omega))
	// Output: final_epoch 2 3
}
