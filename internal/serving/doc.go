// Package serving is what answers queries and audits deletions on a fitted model, with no
// I/O: the immutable serving form of a model version (Model, built by New from an Input),
// its certified answers (Model.Answer, and Model.AnswerBatch, which gives a batch the
// same answers bit for bit while reading the exact rows once), the deletion effect of appendix D
// (Model.DeletionEffect), the masks that drop deleted landmarks at once (Model.WithMask),
// model identity (ModelID, Meta), the rebuilding of a stored version (Restore) and its
// export (NewExport).
//
// # Contracts
//
// A Model is immutable once New returns: a mask change or a new evaluation draw makes a
// new Model, so readers that loaded one never see it change and may share it across
// goroutines. Answer and AnswerBatch write only into the caller's Workspace (one per goroutine) and
// counts nothing; CountDraw counts one answer against a sketched model's draw, and is
// safe for concurrent use. Inputs are not modified; New keeps references to the slices
// and matrices of its Input, which the caller must not change afterwards.
//
// # Exact rows
//
// A model answers on the exact path (variance model exact_kernel: kernel rows of the
// exact eNTK k*, radii only their rounding bound, certified meaning the top-K equals the
// exact-kernel top-K with certainty) when its landmarks' exact rows fit
// query.exact_memory_bytes (Settings.ExactMemoryBytes), in one of two float32
// representations chosen by NewExactRows, which answers never tell apart except by
// their radii:
//
//   - full rows φ (entk.ExactTo, ExactDim floats per landmark) whenever they fit: the
//     convnet's only representation, unchanged bit for bit;
//   - factored rows (entk.Factored) for the dense backbones when full rows do not fit:
//     per Linear layer the input a and the d output gradients Δ̃, k* = Σ_layers
//     (<a, a'> + 1)·<Δ̃, Δ̃'>. For the shipped Adult resmlp:108-128x3-8 a landmark takes
//     8,172 floats instead of 904,321 (16.7 MB for M = 512 instead of 1.85 GB, over the
//     default 256 MiB), and a query one forward and one d-column backward sweep plus two
//     dot products per layer and landmark. The radius of an entry is
//     entk.Factored.RowError ≈ 1.19e-7·sqrt(k*(x_ℓ,x_ℓ)·k*(x_t,x_t)), twice the full rows'
//     float32 term, since both factors of a product carry a float32 rounding.
//
// Otherwise the sketched evaluation draw answers. The residual fraction's Gram matrix,
// AnswerBatch (which reads the rows once per batch either way) and ReseedJaccard use
// whichever representation the rows have.
//
// Randomness: a sketched model's evaluation draw is the named stream Settings.DrawName
// under Settings.Seed, and the deletion effect's random sets the stream
// "daemon/audit/<request>" (names kept from when this code lived in daemon, so stored
// states and audits replay byte for byte).
package serving
