package ops

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/approval"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/telegram"
)

const approvalOwner = int64(4242)

// withApprovals gives s a broker that asks the owner on a fake Telegram,
// and answers a function that presses button on the n-th question.
func withApprovals(t *testing.T, s *Service) func(n int, button string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	tg := faketg.New()
	t.Cleanup(tg.Close)
	c, err := telegram.New(ctx, telegram.Config{Token: "1:t", APIURL: tg.URL(), Logger: slog.New(slog.DiscardHandler),
		Pacing: telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}})
	require.NoError(t, err)
	b := approval.New(approval.Config{Store: s.cfg.Store, Messenger: c, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler),
		Owner: func(context.Context) (int64, error) { return approvalOwner, nil }})
	s.cfg.Approvals = b
	return func(n int, button string) {
		sent, err := tg.WaitSent(ctx, approvalOwner, n)
		require.NoError(t, err)
		m := sent[n-1]
		var data string
		for _, b := range m.Keyboard[0] {
			if b.Text == button {
				data = b.CallbackData
			}
		}
		require.NotEmpty(t, data, "no button %q", button)
		id := tg.Press(faketg.User{ID: approvalOwner}, m.ChatID, m.MessageID, data)
		require.NoError(t, b.Press(ctx, domain.Press{ID: id, From: approvalOwner, ChatID: m.ChatID, MessageID: m.MessageID, Data: data}))
	}
}

// A tool marked "approval: groups" runs for a group only once the owner
// allowed that very call, over IPC and MCP alike; a denial runs nothing
// and is the group's 403; main's calls do not wait; a host that cannot ask
// refuses.
func TestHostToolWaitsForTheOwner(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	tool := "description: appends\napproval: groups\ngroups: all\n" +
		`command: ["/bin/sh", "-c", "echo $0 >> ` + ran + `; echo done-$0", "{text}"]` +
		"\ninput_schema: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}"
	s, st := setupTools(t, map[string]string{"w.md": "name: w\n" + tool}, "w")

	status, body := ask(t, s, familyID, "host_tool", `{"name":"w","args":{"text":"nobroker"}}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, `denied: tool \"w\" waits for the owner's approval, and this host cannot ask`)
	status, body = ask(t, s, mainID, "host_tool", `{"name":"w","args":{"text":"main"}}`)
	assert.Equal(t, 200, status, "main does not wait under approval: groups")
	assert.Contains(t, body, "done-main")

	press := withApprovals(t, s)
	type answer struct {
		status int
		body   string
	}
	call := func(text string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			status, body := ask(t, s, familyID, "host_tool", `{"name":"w","args":{"text":"`+text+`"}}`)
			ch <- answer{status, body}
		}()
		return ch
	}
	res := call("first")
	press(1, "Allow once")
	a := <-res
	assert.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, "done-first")
	res = call("second")
	press(2, "Deny")
	a = <-res
	assert.Equal(t, 403, a.status)
	assert.Contains(t, a.body, "denied: the owner declined")

	// The same over MCP.
	srv := httptest.NewServer(s.MCP(familyID))
	defer srv.Close()
	ctx := context.Background()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	defer sess.Close()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "w", Arguments: map[string]any{"text": "mcp-denied"}})
		assert.NoError(t, err)
		done <- r
	}()
	press(3, "Deny")
	r := <-done
	assert.True(t, r.IsError)
	assert.Equal(t, "denied: the owner declined", r.Content[0].(*mcp.TextContent).Text)
	go func() {
		r, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "w", Arguments: map[string]any{"text": "mcp-allowed"}})
		assert.NoError(t, err)
		done <- r
	}()
	press(4, "Allow once")
	r = <-done
	assert.False(t, r.IsError)

	b, err := os.ReadFile(ran)
	require.NoError(t, err)
	assert.Equal(t, "main\nfirst\nmcp-allowed\n", string(b), "only what the owner allowed ran, once each")
	entries, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	var log strings.Builder
	for _, e := range entries {
		log.WriteString(e.Group + " " + e.Operation + " " + e.Decision + " " + e.Reason + "\n")
	}
	assert.Equal(t, 3, strings.Count(log.String(), "family ipc.host_tool deny"), log.String())
	assert.Equal(t, 2, strings.Count(log.String(), "family approval allow"), log.String())
}
