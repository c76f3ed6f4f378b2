package types

import (
	"math"
	"testing"
)

// AppendFloat rendered NaN and infinities by searching for an exponent
// they do not have and panicked (found through FuzzDecodeKey, which
// printed a decoded NaN). SQL arithmetic does not produce them, but a
// datum's String must never panic.
func TestAppendFloatNonFinite(t *testing.T) {
	for f, want := range map[float64]string{math.NaN(): "NaN", math.Inf(1): "+Inf", math.Inf(-1): "-Inf"} {
		if got := string(AppendFloat(nil, f, 64)); got != want {
			t.Errorf("AppendFloat(%v) = %q, want %q", f, got, want)
		}
		if got := NewFloat(f).String(); got != want {
			t.Errorf("NewFloat(%v).String() = %q", f, got)
		}
	}
}
