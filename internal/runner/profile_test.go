package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func TestProfileLimits(t *testing.T) {
	base := sandbox.DefaultLimits
	tests := []struct {
		name string
		p    domain.Profile
		want func(l *sandbox.Limits)
	}{
		{name: "default changes nothing", p: domain.Profile{Name: "default"}, want: func(*sandbox.Limits) {}},
		{name: "all set", p: domain.Profile{MemoryMB: 2048, Pids: 64, CPUs: 0.5, Timeout: time.Minute, DiskMB: 10},
			want: func(l *sandbox.Limits) {
				l.MemoryBytes, l.Pids, l.CPUs, l.Timeout, l.DiskBytes = 2048<<20, 64, 0.5, time.Minute, 10<<20
			}},
		{name: "small memory shrinks the tmpfs", p: domain.Profile{MemoryMB: 128},
			want: func(l *sandbox.Limits) { l.MemoryBytes, l.TmpBytes, l.ShmBytes = 128<<20, 32<<20, 8<<20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			tt.want(&want)
			require.Equal(t, want, profileLimits(base, tt.p))
		})
	}
}
