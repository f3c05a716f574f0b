package sample

import (
	"math"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		name          string
		in            []float64
		med, min, max float64
		n             int
	}{
		{"one", []float64{3}, 3, 3, 3, 1},
		{"odd", []float64{5, 1, 3}, 3, 1, 5, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5, 1, 4, 4},
		{"nan ignored", []float64{math.NaN(), 2, 4}, 3, 2, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.in...)
			got := Of(tt.in)
			if got.Median != tt.med || got.Min != tt.min || got.Max != tt.max || got.N != tt.n {
				t.Errorf("Of(%v) = %+v", tt.in, got)
			}
			for i := range in {
				if in[i] != tt.in[i] && !math.IsNaN(in[i]) {
					t.Errorf("Of modified its input")
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if s := Of(nil); s.N != 0 || !math.IsNaN(s.Median) {
			t.Errorf("Of(nil) = %+v", s)
		}
	})
}
