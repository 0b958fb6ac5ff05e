package fakellm

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func user(text string) Message {
	return Message{Role: "user", Content: []Block{{Type: "text", Text: text}}}
}

func TestPlan(t *testing.T) {
	prompt := user("SLEEP 3s\nTOOL a {\"x\":1}</message>\nTOOL b {}")
	use := func(id string) Message {
		return Message{Role: "assistant", Content: []Block{{Type: "tool_use", ID: id}}}
	}
	result := func(id, text string) Message {
		return Message{Role: "user", Content: []Block{{Type: "tool_result", ToolUseID: id, Content: text}}}
	}
	tests := []struct {
		name      string
		msgs      []Message
		wantTool  string
		wantInput string
		wantText  string
		wantSleep time.Duration
	}{
		{"first tool, with sleep", []Message{prompt}, "a", `{"x":1}`, "", 3 * time.Second},
		{"second tool, no sleep", []Message{prompt, use("toolu_1"), result("toolu_1", "r1")}, "b", `{}`, "", 0},
		{"final", []Message{prompt, use("toolu_1"), result("toolu_1", "r1"), use("toolu_2"), result("toolu_2", "r2")}, "", "", "results:\nr1\nr2", 0},
		{"older history ignored", []Message{user("TOOL x {}"), {Role: "assistant", Content: []Block{{Type: "text", Text: "old"}}}, user("hi &quot;you&quot;")}, "", "", `echo: hi "you"`, 0},
		{"tools run before the reply", []Message{user("TOOL a {}\nsay REPLY done &amp; dusted</message>")}, "a", `{}`, "", 0},
		{"reply after tools", []Message{user("TOOL a {}\nREPLY done</message>"), use("toolu_1"), result("toolu_1", "r")}, "", "", "done", 0},
		{"sleep inside text, bad unit ignored", []Message{user("x SLEEP 2ms y\nSLEEP 5parsecs")}, "", "", "echo: x SLEEP 2ms y\nSLEEP 5parsecs", 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan(tt.msgs)
			require.NoError(t, err)
			assert.Equal(t, tt.wantSleep, got.sleep)
			if tt.wantTool == "" {
				assert.Nil(t, got.tool)
				assert.Equal(t, tt.wantText, got.text)
				return
			}
			require.NotNil(t, got.tool)
			assert.Equal(t, tt.wantTool, got.tool.name)
			assert.JSONEq(t, tt.wantInput, string(got.tool.input))
		})
	}
	_, err := plan([]Message{{Role: "assistant", Content: []Block{{Type: "text", Text: "x"}}}})
	assert.ErrorIs(t, err, errNoPrompt)
}

func TestLongText(t *testing.T) {
	for _, n := range []int{1, 2, 13, 14, 15, 100, 4096, 10000} {
		s := longText(n)
		assert.Len(t, s, n)
		assert.NotContains(t, []byte{' ', '\n'}, s[len(s)-1])
	}
	assert.Equal(t, "", longText(0))
}

func TestCheckToolPairing(t *testing.T) {
	in := json.RawMessage(`{}`)
	ok := []Message{user("x"), {Role: "assistant", Content: []Block{{Type: "tool_use", ID: "a", Input: in}}},
		{Role: "user", Content: []Block{{Type: "tool_result", ToolUseID: "a"}}}}
	assert.NoError(t, checkToolPairing(ok))
	assert.Error(t, checkToolPairing(ok[:2]))
	bad := append([]Message{}, ok...)
	bad[2] = Message{Role: "user", Content: []Block{{Type: "tool_result", ToolUseID: "b"}}}
	assert.Error(t, checkToolPairing(bad))
}

func TestPlanDrip(t *testing.T) {
	ans, err := plan([]Message{user("DRIP 40ms\nREPLY slowly written")})
	require.NoError(t, err)
	assert.Equal(t, 40*time.Millisecond, ans.drip)
	assert.Equal(t, "slowly written", ans.text)
	ans, err = plan([]Message{user("REPLY fast")})
	require.NoError(t, err)
	assert.Zero(t, ans.drip)
}
