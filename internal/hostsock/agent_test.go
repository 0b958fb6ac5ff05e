package hostsock

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/fakellm"
)

// TestAgentThroughRebuiltRequests runs clawpen-agent's own model code (the
// real Anthropic and OpenAI SDKs, which always stream) through the socket to
// the fake provider: a tool call and its result make the round trip, and the
// provider receives the host's model and the capped max_tokens.
func TestAgentThroughRebuiltRequests(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			llm := fakellm.New()
			t.Cleanup(llm.Close)
			llm.SetRequiredKey(hostKey)
			s, _ := listen(t, Config{
				Anthropic: Upstream{BaseURL: llm.URL(), APIKey: hostKey},
				OpenAI:    Upstream{BaseURL: llm.URL() + "/v1", APIKey: hostKey},
				Model:     hostModel,
				MaxTokens: 4096,
			})
			model, err := agent.NewModel(provider, socketClient(s.Path()))
			require.NoError(t, err)

			req := agent.ModelRequest{
				Model:     "model-the-sandbox-wants",
				MaxTokens: 20000, // above the cap (the SDK wants streaming for far more)
				System:    "You are a test.",
				Tools: []agent.ToolDef{{Name: "bash", Description: "run a command",
					Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}}},
				Messages: []agent.Message{{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockText,
					Text: `please TOOL bash {"command":"echo <hi> & bye"}`}}}},
			}
			resp, err := model.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, "tool_use", resp.StopReason)
			require.Len(t, resp.Content, 1)
			use := resp.Content[0]
			assert.Equal(t, "bash", use.Name)
			assert.JSONEq(t, `{"command":"echo <hi> & bye"}`, string(use.Input))

			req.Messages = append(req.Messages,
				agent.Message{Role: agent.RoleAssistant, Content: resp.Content},
				agent.Message{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockToolResult, ToolUseID: use.ID, Text: "<hi> & bye"}}})
			resp, err = model.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Len(t, resp.Content, 1)
			assert.Equal(t, "results:\n<hi> & bye", resp.Content[0].Text)

			got := llm.Requests()
			require.Len(t, got, 2)
			for _, r := range got {
				assert.Equal(t, hostModel, r.Model)
				assert.Equal(t, int64(4096), r.MaxTokens)
				assert.True(t, r.Stream)
				assert.Equal(t, []string{"bash"}, r.ToolNames())
				assert.Equal(t, "You are a test.", r.System)
				var tool map[string]any
				require.NoError(t, json.Unmarshal(r.Tools[0].InputSchema, &tool))
				assert.Equal(t, []any{"command"}, tool["required"])
			}
		})
	}
}
