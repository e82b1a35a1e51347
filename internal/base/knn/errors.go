package knn

import "errors"

// Sentinel errors; functions wrap them with the offending value.
var (
	// ErrEmpty reports a reference set with no rows or no columns.
	ErrEmpty = errors.New("knn: empty reference set")
	// ErrLabel reports a negative class label.
	ErrLabel = errors.New("knn: negative label")
	// ErrK reports a neighbour count below 1.
	ErrK = errors.New("knn: neighbour count must be at least 1")
)
