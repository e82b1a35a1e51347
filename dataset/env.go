package dataset

// The loaders' environment variables. They belong to cairn's one CAIRN_ namespace
// (config/doc.go "Environment"): config knows them as the loaders', so setting one never
// stops the daemon from starting, while any other unknown CAIRN_ variable is reported.
const (
	// EnvMNISTDir names a directory holding the four MNIST IDX files (gzipped), used
	// instead of the GoMNIST module's copy.
	EnvMNISTDir = "CAIRN_MNIST_DIR"
	// EnvFashionMNISTDir names a directory holding the Fashion-MNIST IDX files, used
	// instead of /usr/share/datasets/fashion-mnist.
	EnvFashionMNISTDir = "CAIRN_FASHION_MNIST_DIR"
)

// EnvVars returns the names of every environment variable the loaders read.
func EnvVars() []string { return []string{EnvMNISTDir, EnvFashionMNISTDir} }
