package ops

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The go-sdk's own client lists the group's tools only, calls one, and a
// call of a tool it may not call is refused as /ipc/host_tool refuses it,
// and audited.
func TestMCPListsGroupToolsAndRefusesTheSame(t *testing.T) {
	s, st := setupTools(t, map[string]string{
		"m.md": "name: m\n" + echoTool,
		"a.md": "name: a\ngroups: all\n" + echoTool,
		"b.md": "name: b\ngroups: all\n" + echoTool,
	}, "a", "m")
	srv := httptest.NewServer(s.MCP(familyID))
	defer srv.Close()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	defer sess.Close()

	list, err := sess.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		assert.Contains(t, tl.Description, "guidance")
	}
	assert.Equal(t, []string{"a"}, names, "main-only m and unlisted b are not family's")

	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "a", Arguments: map[string]any{"text": "via-mcp"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `"stdout":"via-mcp\n"`)

	for _, name := range []string{"m", "b", "nosuch"} {
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}})
		require.NoError(t, err, name)
		assert.True(t, res.IsError, name)
		assert.Equal(t, `denied: no bridge tool "`+name+`" that this group may call`, res.Content[0].(*mcp.TextContent).Text)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "a", Arguments: map[string]any{"text": 5}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "want string")

	entries, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	var log strings.Builder
	for _, e := range entries {
		log.WriteString(e.Group + " " + e.Operation + " " + e.Decision + " " + e.Reason + "\n")
	}
	assert.Equal(t, 1, strings.Count(log.String(), "family ipc.host_tool allow tool a args sha256:"), log.String())
	assert.Equal(t, 3, strings.Count(log.String(), "family ipc.host_tool deny"), log.String())
	assert.Equal(t, 1, strings.Count(log.String(), "family ipc.host_tool error"), log.String())
}
