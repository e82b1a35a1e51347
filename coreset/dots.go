package coreset

import "github.com/cairnhq/cairn/internal/base/vec"

// dot is vec.Dot: four fused multiply-add lanes, the same bits on every machine and in
// every blocked sweep (vec.DotsTo).
func dot(a, b []float64) float64 { return vec.Dot(a, b) }
