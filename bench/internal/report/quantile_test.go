package report

import (
	"testing"
	"time"
)

func TestNearestRank(t *testing.T) {
	four := []float64{10, 20, 30, 40}
	tests := []struct {
		q    float64
		want float64
	}{
		{0, 10}, {0.01, 10}, {0.25, 10}, {0.26, 20}, {0.5, 20}, {0.51, 30}, {0.99, 40}, {1, 40}, {1.5, 40},
	}
	for _, tc := range tests {
		if got, ok := NearestRank(four, tc.q); !ok || got != tc.want {
			t.Errorf("NearestRank(%v, %v) = %v, %v; want %v, true", four, tc.q, got, ok, tc.want)
		}
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	if got, _ := NearestRank(hundred, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v, want 99ms", got)
	}
	if got, _ := NearestRank(hundred, 0.999); got != 100*time.Millisecond {
		t.Errorf("p99.9 of 1..100 ms = %v, want 100ms", got)
	}
	if got, ok := NearestRank([]int(nil), 0.5); ok || got != 0 {
		t.Errorf("NearestRank(nil) = %v, %v; want 0, false", got, ok)
	}
}
