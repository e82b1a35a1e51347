//go:build race

package onnx

// raceEnabled: the race detector makes sync.Pool drop about a quarter of what is Put, so a
// pooled path allocates now and then and allocation counts are not checked under it.
const raceEnabled = true
