// Package serving is what answers queries and audits deletions on a fitted model, with no
// I/O but the rows files of exact rows past the memory budget (Disk): the immutable serving form of a model version (Model, built by New from an Input),
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
// query.exact_memory_bytes (Settings.ExactMemoryBytes) or, past it,
// query.exact_disk_bytes, in one of two float32
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
// Past the memory budget the same rows may be held on disk (next section); otherwise
// the sketched evaluation draw answers. The residual fraction's Gram matrix,
// AnswerBatch (which reads the rows once per batch either way) and ReseedJaccard use
// whichever representation the rows have.
//
// # Exact rows on disk
//
// When neither representation fits query.exact_memory_bytes but one fits
// query.exact_disk_bytes (Settings.ExactDisk, a Disk under data_dir/exactrows), New
// writes the rows once per model version to a rows file (diskrows.go: a 64-byte header
// with format version, representation, model version, M, floats per row and a CRC-32C,
// then the float32 rows little-endian), computing them in chunks of about 32 MiB so they
// never sit in memory whole, syncs it, maps it read-only (syscall.Mmap, MAP_SHARED),
// checks size, header and checksum over the mapped bytes, and serves the mapping as the
// rows' []float32. Every reader is the same code over the same float32 values in the
// same order, so an answer from disk rows is bit for bit the answer from memory rows
// (TestDiskRowsBitIdentical); AnswerBatch reads them in one pass per batch, from the page
// cache when it holds them. Factored rows go to disk before full rows (111× less to read
// per query for the Adult resmlp, at twice the radius); the choice is otherwise the
// memory one. Answers and /status say which holds the rows ("exact_rows": "memory" or
// "disk", ExactRows.Where, Model.Variance).
//
// Lifecycle, chosen over keeping the file until the version retires: the file's name is
// removed as soon as it is mapped and checked. No other process can then open it, so
// the one checksum check covers the rows for as long as they are served (a shared
// mapping would show any later write to a named file), and a crash or kill -9 leaves
// nothing behind: the kernel frees the blocks at exit, and a Disk removes on first use
// any file a crash left between writing and mapping. The mapping itself goes when the
// ExactRows becomes unreachable (runtime.AddCleanup): when the version has retired and no
// answer, audit or export still holds a Model of it, at the next garbage collection (Go
// forces one at least every two minutes). Unmapping at the swap instead would fault any
// answer still reading the old version, which the query loops load lock-free. So a
// retired version's rows, which hold Jacobian data of its landmarks, erased points'
// included, are held exactly as long as rows in memory would be, and never outlive the
// process. A damaged file (size, header or checksum) or a failed write (a full disk) is
// not used: the model answers on the sketched path with the reason in
// Model.ExactRowsErr (ErrRowsDamaged, ErrRowsDisk), which the daemon logs; a new
// evaluation draw of it tries the disk again. The budget is per version: while a refit's
// version replaces the served one, both may be mapped (Disk.Mapped). ReseedJaccardOn
// measures the pool stability of such a model on disk rows too (two transient files,
// unmapped before it returns), bit for bit the memory result; without it the answers of
// a model served from disk separate but stay unstable (no pool stability measured).
// ReseedJaccardRows hands the served pool's rows, when it held them in memory, to its
// caller with their Gram matrix computed, and New takes them as Input.Exact: the refit
// computes a model's exact rows once, beside its fits, not again for the serving form.
// Rows are never modified after they are built, so a model and a measurement may share
// them. A row is a function of its landmark's input alone, so NewExactRowsReusing takes
// the rows of inputs it is given rows of (bit for bit, in the same representation) and
// computes only the rest: the measurement reuses the served model's rows, and the
// reseeded pool reuses the served pool's.
//
// Randomness: a sketched model's evaluation draw is the named stream Settings.DrawName
// under Settings.Seed, and the deletion effect's random sets the stream
// "daemon/audit/<request>" (names kept from when this code lived in daemon, so stored
// states and audits replay byte for byte).
package serving
