package ingest

import (
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// IndexLimits are the input entries f's backbone reads as table indices (an ONNX model's
// embedding codes, pipeline.Features.IndexInputs), as the decoders check them
// (stream.Limits.Indices: an integer in [0, N) or reason bad_index); nil for a backbone
// without any.
func IndexLimits(f *pipeline.Features) []stream.IndexLimit {
	var out []stream.IndexLimit
	for _, in := range f.IndexInputs() {
		out = append(out, stream.IndexLimit{Pos: in.Pos, N: in.N})
	}
	return out
}
