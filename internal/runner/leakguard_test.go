package runner

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/store"
)

// A prompt holding a secret of the host's (a user pasted it, a task holds
// it) reaches the sandbox, and so the model, redacted; the find is
// audited. The secret is known from the guard's source at the run's start.
func TestPromptRedactedBeforeTheSandbox(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "data", "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	const secret = "sk-live-0123456789abcdef"
	var known []leakguard.Secret
	r := New(Config{
		GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL()}},
		Audit: st.Audit, Logger: slog.New(slog.DiscardHandler),
		Guard: leakguard.NewFrom(func() []leakguard.Secret { return known }),
	}, &inProcess{})
	known = []leakguard.Secret{{Name: "PAY_KEY", Value: secret}}
	g := domain.Group{Folder: "family", ChatID: -5}
	ans, err := r.Start(ctx, Request{Group: g, Prompt: "REPLY ok " + secret, ContextMode: domain.ContextIsolated}).Wait()
	require.NoError(t, err)
	assert.Equal(t, "ok [redacted]", ans.Text, "what the model got")
	reqs := llm.Requests()
	require.NotEmpty(t, reqs)
	for _, q := range reqs {
		assert.False(t, bytes.Contains(q.Body, []byte(secret)))
		assert.True(t, bytes.Contains(q.Body, []byte(leakguard.Redacted)))
	}
	log, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	require.NotEmpty(t, log)
	assert.Equal(t, "leakguard", log[0].Operation)
	assert.Equal(t, "redacted 1 secret (PAY_KEY; plain) from the prompt of a run", log[0].Reason)
}
