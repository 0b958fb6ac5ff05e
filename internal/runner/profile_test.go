package runner

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/store"
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

// Each group's runs reach the provider with its profile's model (the
// host's for a profile naming none), whatever the sandbox asks for, and
// the tokens are recorded under that model.
func TestProfileModelIsPinned(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "data", "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	profiles := map[string]domain.Profile{
		"cheap":   {Name: "cheap", Model: "claude-haiku-test"},
		"default": {Name: "default"},
	}
	r := New(Config{
		GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL()}},
		Profile: func(name string) (domain.Profile, error) { return profiles[name], nil },
		Usage:   st, Logger: slog.New(slog.DiscardHandler),
	}, &inProcess{askModel: "claude-opus-what-i-want"})
	for _, g := range []domain.Group{{Folder: "family", ChatID: -5, Profile: "cheap"}, {Folder: "work", ChatID: -6}} {
		ans, err := r.Start(ctx, Request{Group: g, Prompt: `TOOL bash {"command":"true"} REPLY ok`, ContextMode: domain.ContextIsolated}).Wait()
		require.NoError(t, err)
		require.Equal(t, "ok", ans.Text)
	}
	var models []string
	for _, req := range llm.Requests() {
		models = append(models, req.Model)
	}
	assert.Equal(t, []string{"claude-haiku-test", "claude-haiku-test", "claude-test", "claude-test"}, models)
	require.Eventually(t, func() bool {
		use, err := st.ModelUsageSince(ctx, "")
		return err == nil && len(use) == 2 && use[0].Requests+use[1].Requests == 4
	}, 5*time.Second, 10*time.Millisecond)
	use, err := st.ModelUsageSince(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"family claude-haiku-test", "work claude-test"}, []string{use[0].Group + " " + use[0].Model, use[1].Group + " " + use[1].Model})
}
