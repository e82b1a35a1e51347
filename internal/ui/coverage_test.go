package ui

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// coverageFake is fake with an ONNX backbone of which the kernel covers 15 of 20
// parameters, with one load warning.
type coverageFake struct{ fake }

func (f coverageFake) Overview() Overview {
	o := f.fake.Overview()
	o.Backbone = "onnx:abc (model.onnx)"
	o.Coverage = BackboneCoverage{KernelParams: 15, ModelParams: 20, Share: 0.75, Warnings: []string{"unused-parameter: fc.bias <b>"}}
	return o
}

// TestOverviewCoverage: the overview states the backbone and its coverage, and lists the
// warnings escaped; without a backbone (an older Source) the line is absent.
func TestOverviewCoverage(t *testing.T) {
	_, page := serve(t, New(coverageFake{newFake()}, Shape{}, zerolog.Nop()), "GET", "/ui")
	for _, want := range []string{"<code>onnx:abc (model.onnx)</code>", "kernel over <b>15</b> of 20 parameters (75%)",
		`<div class="warn">unused-parameter: fc.bias &lt;b&gt;</div>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %q:\n%s", want, page)
		}
	}
	if _, page := serve(t, New(newFake(), Shape{}, zerolog.Nop()), "GET", "/ui"); strings.Contains(page, "kernel over") {
		t.Errorf("an overview without a backbone states a coverage")
	}
}
