package hostsock

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// /mcp goes to the configured MCP handler, with every method (the handler
// refuses what it does not serve); without one it is a 404.
func TestMCPRoute(t *testing.T) {
	_, hc := listen(t, Config{})
	resp, err := hc.Post("http://clawpen/mcp", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": "no MCP server on this socket"}, decodeJSON(t, resp))

	var methods []string
	_, hc = listen(t, Config{MCP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		w.WriteHeader(http.StatusTeapot)
	})})
	resp, err = hc.Post("http://clawpen/mcp", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTeapot, resp.StatusCode)
	resp, err = hc.Get("http://clawpen/mcp")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{http.MethodPost, http.MethodGet}, methods)
}
