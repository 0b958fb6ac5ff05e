package ops

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/store"
)

const toolSecret = "tool-secret-value-0123456789"

// guarded gives s a guard whose secrets are its tools' env values, read
// at each Refresh as serve's are.
func guarded(s *Service) {
	s.cfg.Guard = leakguard.NewFrom(func() []leakguard.Secret {
		var out []leakguard.Secret
		for _, tl := range s.cfg.Tools.Load().Tools {
			for _, k := range tl.Env {
				out = append(out, leakguard.Secret{Name: k, Value: s.cfg.ToolEnv(k)})
			}
		}
		return out
	})
}

func writeTool(t *testing.T, s *Service, name, fm string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.cfg.Tools.Path(), name), []byte("---\n"+fm+"\n---\nguidance\n"), 0o600))
}

func leakRows(t *testing.T, st *store.Store) []string {
	t.Helper()
	log, err := st.AuditLog(context.Background(), 0)
	require.NoError(t, err)
	var out []string
	for _, e := range log {
		if e.Operation == "leakguard" {
			out = append(out, e.Group+": "+e.Reason)
		}
	}
	return out
}

// A bridge tool that prints its environment, plainly and in base64, hands
// the agent its output with the values redacted; a tool defined after the
// guard was made is covered too. The owner's own call is not redacted.
func TestBridgeToolOutputRedacted(t *testing.T) {
	files := map[string]string{"env.md": `name: env
description: prints its env
command: ["/bin/sh", "-c", "env; printf %s \"$TOOL_KEY\" | base64 >&2", "{x}"]
input_schema: {type: object, properties: {x: {type: string}}, required: [x]}
groups: all
env: [TOOL_KEY]`}
	s, st := setupTools(t, nil, "env")
	guarded(s)
	for name, fm := range files {
		writeTool(t, s, name, fm)
	}
	s.cfg.ToolEnv = func(k string) string {
		return map[string]string{"PATH": "/usr/bin:/bin", "TOOL_KEY": toolSecret}[k]
	}
	status, body := ask(t, s, familyID, "host_tool", `{"name":"env","args":{"x":"1"}}`)
	require.Equal(t, 200, status, body)
	assert.NotContains(t, body, toolSecret)
	assert.NotContains(t, body, base64.StdEncoding.EncodeToString([]byte(toolSecret))[:20])
	assert.Contains(t, body, "TOOL_KEY=[redacted]")
	rows := leakRows(t, st)
	assert.ElementsMatch(t, []string{"family: redacted 1 secret (TOOL_KEY; plain) from the stdout of bridge tool env",
		"family: redacted 1 secret (TOOL_KEY; base64) from the stderr of bridge tool env"}, rows)

	res, err := s.HostTool(context.Background(), domain.Owner(), "env", []byte(`{"x":"1"}`))
	require.NoError(t, err)
	assert.Contains(t, res.Stdout, toolSecret, "the owner's terminal is the host's")
}

// send_message redacts the whole text before it is split, so a secret cut
// by the split is found.
func TestSendMessageRedacted(t *testing.T) {
	s, st := setupTools(t, map[string]string{"env.md": "name: env\ndescription: d\ncommand: [\"/bin/true\"]\ninput_schema: {type: object}\nenv: [TOOL_KEY]"})
	s.cfg.ToolEnv = func(k string) string { return map[string]string{"TOOL_KEY": toolSecret}[k] }
	guarded(s)
	text := strings.Repeat("y", 4096-len(toolSecret)/2) + toolSecret
	status, body := ask(t, s, familyID, "send_message", `{"text":"`+text+`"}`)
	require.Equal(t, 200, status, body)
	rows, err := st.PendingOutboxOf(context.Background(), -100)
	require.NoError(t, err)
	var sent strings.Builder
	for _, o := range rows {
		sent.WriteString(o.Text)
	}
	assert.NotContains(t, sent.String(), toolSecret[:10])
	assert.True(t, strings.HasSuffix(sent.String(), leakguard.Redacted))
	assert.Len(t, leakRows(t, st), 1)
}
