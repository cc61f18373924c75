package chunk

import (
	"math"
	"testing"
)

// tenth is a variable so that tenth+0.2 is float64 arithmetic, not an
// exact constant.
var tenth = 0.1

func TestPlanValues_DecimalExponent(t *testing.T) {
	tests := []struct {
		name string
		vs   []float64
		e    int // -1: not decimal
		ms   []int64
	}{
		{"integers", []float64{1, 2, 3}, 0, []int64{1, 2, 3}},
		{"raised once", []float64{1, 2.5}, 1, []int64{10, 25}},
		{"raised twice", []float64{1, 2.5, 3.25}, 2, []int64{100, 250, 325}},
		{"first value needs digits", []float64{0.001, 1}, 3, []int64{1, 1000}},
		{"negative", []float64{-21.5, -0.25}, 2, []int64{-2150, -25}},
		{"big integer", []float64{1e15}, 0, []int64{1e15}},
		{"largest mantissa", []float64{1<<53 - 1, 1<<53 - 1}, 0, []int64{1<<53 - 1, 1<<53 - 1}},
		{"mantissa too big", []float64{1 << 53}, -1, nil},
		{"rescale overflows", []float64{1<<53 - 1, 0.5}, -1, nil},
		{"inexact sum", []float64{tenth + 0.2}, -1, nil}, // 0.30000000000000004
		{"negative zero", []float64{1, math.Copysign(0, -1)}, -1, nil},
		{"NaN", []float64{math.NaN()}, -1, nil},
		{"infinity", []float64{math.Inf(1)}, -1, nil},
		{"16 digits", []float64{0.1234567890123456}, -1, nil},
		{"15 digits", []float64{0.123456789012345}, 15, []int64{123456789012345}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := make([]int64, len(tt.vs))
			var sc planScratch
			p := planValues(tt.vs, ms, 1<<valDecimal, &sc)
			if tt.e < 0 {
				if p.enc == valDecimal {
					t.Fatalf("decimal with e=%d, mantissas %v; want not decimal", p.exp, ms)
				}
				return
			}
			if p.enc != valDecimal || p.exp != tt.e || !sameInts(ms, tt.ms) {
				t.Fatalf("encoding %d, e=%d, mantissas %v; want decimal, e=%d, %v", p.enc, p.exp, ms, tt.e, tt.ms)
			}
		})
	}
}
