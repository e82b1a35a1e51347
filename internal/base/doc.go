// Package base is the first of internal's two layers: the numeric and encoding base
// that the service is built on, with no knowledge of Kafka, bbolt, configuration or
// the daemon. Its packages depend only on the standard library, gonum,
// golang.org/x/sys/cpu (the CPU features vec and gemm dispatch on) and each other:
//
//   - vec: the dot-product kernels (float64 and float32) of the pool and the kernel rows;
//   - gemm: a blocked, deterministic GEMM behind gonum's BLAS for the large products;
//   - rng: independent, reproducible random streams named under one configured seed;
//   - lanczos: the symmetric Lanczos iteration of SLQ d_eff and the fit's spectra;
//   - knn: cosine k-nearest-neighbour accuracy and the 50-NN confidence;
//   - linsvm: the linear probe of the paper's evaluation;
//   - binenc: the one binary codec of stored values and model-topic records;
//   - gcpace: the garbage collector's pace for cairn's commands;
//   - par: fixed-chunk parallel row loops whose results do not depend on GOMAXPROCS.
//
// Every function in them is deterministic for a given input and GOMAXPROCS-independent
// in its bits (parallel paths reduce in a fixed order). The second layer, the service,
// sits directly under internal/; the laboratory (reproduction tables, verification
// studies, benchmarks, validation) under internal/lab. Package internal's
// documentation is the map, naming every package of each layer; the list above names
// every package of the base (both checked by internal/lint, TestLayerDocs).
package base
