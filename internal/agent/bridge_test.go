package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
)

// The job's bridge tools are offered under their own names, schema and
// guidance included, on both providers; a call goes to /ipc/host_tool
// with the model's arguments as they are; one named like a built-in is
// not offered.
func TestBridgeToolsOfferedAndCalled(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			j := testJob(`TOOL web_search {"query":"go 1.26","count":3}`)
			j.Provider = provider
			j.Tools = []domain.JobTool{
				{Name: "web_search", Description: "Search the web.", Guidance: "Prefer few results.",
					InputSchema: []byte(`{"type":"object","properties":{"query":{"type":"string"},"count":{"type":"integer"}},"required":["query"],"additionalProperties":false}`)},
				{Name: "bash", Description: "not the real bash", InputSchema: []byte(`{"type":"object"}`)},
			}
			out := e.run(t, j)
			assert.Equal(t, "results:\n{\"ok\":true}", out)
			e.mu.Lock()
			ipc := e.ipc
			e.mu.Unlock()
			require.Len(t, ipc, 1)
			assert.JSONEq(t, `{"name":"web_search","args":{"query":"go 1.26","count":3}}`, ipc[0][len("host_tool "):])
			assert.Equal(t, "host_tool", ipc[0][:len("host_tool")])

			req := e.llm.Requests()[0]
			assert.Equal(t, append(agent.ToolNames(), "web_search"), req.ToolNames(), "bash stays the built-in")
			ws := req.Tools[len(req.Tools)-1]
			assert.Contains(t, ws.Description, "Search the web.")
			assert.Contains(t, ws.Description, "Prefer few results.")
			var schema map[string]any
			require.NoError(t, json.Unmarshal(ws.InputSchema, &schema))
			assert.Equal(t, false, schema["additionalProperties"])
			assert.Equal(t, []any{"query"}, schema["required"])
			assert.Equal(t, "object", schema["type"])
		})
	}
}
