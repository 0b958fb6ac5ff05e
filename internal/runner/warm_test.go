package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pool reads this host's memory, and a floor above it (below it)
// makes memory short (not short).
func TestWarmPoolMemoryFloor(t *testing.T) {
	avail, total, err := meminfo()
	require.NoError(t, err)
	require.Positive(t, avail)
	require.GreaterOrEqual(t, total, avail)

	tests := []struct {
		name  string
		floor int64
		short bool
	}{
		{"floor above what is available", total + 1, true},
		{"floor of one byte", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &warmPool{cfg: WarmConfig{MinAvailable: tt.floor}}
			short, got := p.memoryShort()
			assert.Equal(t, tt.short, short)
			assert.Positive(t, got)
		})
	}
}
