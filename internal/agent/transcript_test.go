package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func userText(s string) Message {
	return Message{Role: RoleUser, Content: []Block{{Type: BlockText, Text: s}}}
}
func assistantText(s string) Message {
	return Message{Role: RoleAssistant, Content: []Block{{Type: BlockText, Text: s}}}
}
func assistantTool(id string) Message {
	return Message{Role: RoleAssistant, Content: []Block{{Type: BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{}`)}}}
}
func toolResult(id, text string) Message {
	return Message{Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: id, Text: text}}}
}

// exchange is one prompt, a tool round trip with a big result, and an answer.
func exchange(n int, size int) []Message {
	id := fmt.Sprintf("t%d", n)
	return []Message{
		userText(fmt.Sprintf("prompt %d", n)),
		assistantTool(id),
		toolResult(id, strings.Repeat("r", size)),
		assistantText(fmt.Sprintf("answer %d", n)),
	}
}

// The recent turns kept start at a prompt, never between a tool call and
// its result, hold at most half the budget, and always the last prompt.
func TestCompactCut(t *testing.T) {
	var msgs []Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, exchange(i, 1000)...)
	}
	one := conversationBytes("", exchange(0, 1000))
	for _, tc := range []struct {
		name   string
		budget int64
		first  string
	}{
		{"room for three exchanges in half", (3*one + 3) / 2, "prompt 7"},
		{"for two", (2*one + 3) / 2, "prompt 8"},
		{"too small keeps the last prompt", 1, "prompt 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := compactCut(msgs, tc.budget)
			require.Positive(t, cut)
			assert.Equal(t, tc.first, msgs[cut].text())
			assert.NoError(t, checkPairs(msgs[cut:]))
		})
	}
	assert.Zero(t, compactCut(exchange(0, 10), 1), "one exchange: nothing older to summarise")
}

func TestTranscriptSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, transcriptName)
	got, err := loadTranscript(path)
	require.NoError(t, err)
	assert.Empty(t, got)

	msgs := exchange(1, 10)
	require.NoError(t, saveTranscript(path, msgs))
	got, err = loadTranscript(path)
	require.NoError(t, err)
	assert.Equal(t, msgs, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp files left")

	for name, content := range map[string]string{
		"garbage":  "{",
		"version":  `{"v":7,"messages":[]}`,
		"unpaired": `{"v":1,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{}}]}]}`,
		"role":     `{"v":1,"messages":[{"role":"system","content":[]}]}`,
	} {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := loadTranscript(path)
		assert.Error(t, err, name)
	}
}

func TestCheckPairs(t *testing.T) {
	assert.NoError(t, checkPairs(exchange(1, 1)))
	assert.Error(t, checkPairs([]Message{userText("x"), assistantTool("a")}))
	assert.Error(t, checkPairs([]Message{userText("x"), toolResult("a", "r")}))
	assert.Error(t, checkPairs([]Message{userText("x"), assistantTool("a"), toolResult("b", "r")}))
}

func TestAppendUserMerges(t *testing.T) {
	msgs := []Message{userText("a"), assistantTool("t"), toolResult("t", "r")}
	got := appendUser(msgs, Block{Type: BlockText, Text: "next"})
	require.Len(t, got, 3)
	assert.Len(t, got[2].Content, 2)
	assert.Len(t, msgs[2].Content, 1, "the input is not modified")
	got = appendUser([]Message{assistantText("x")}, Block{Type: BlockText, Text: "y"})
	assert.Len(t, got, 2)
}
