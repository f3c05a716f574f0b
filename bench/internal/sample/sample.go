// Package sample summarises repeated measurements: median and range.
package sample

import (
	"math"
	"slices"
)

// Summary is the median and range of a set of measurements.
type Summary struct {
	Median, Min, Max float64
	N                int // how many measurements
}

// Of summarises xs; NaN values are ignored. The Summary of nothing has NaN
// fields and N == 0. Of does not modify xs.
func Of(xs []float64) Summary {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Min: nan, Max: nan}
	}
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Summary{Median: med, Min: v[0], Max: v[n-1], N: n}
}
