package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/gateway"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// BenchmarkIPC is one /ipc/ round trip on a kept-alive connection: through
// an invocation's unix socket, and through the gateway with the agent's
// own client (TLS, credential looked up on every request).
func BenchmarkIPC(b *testing.B) {
	caller := domain.Caller{Group: "g", Run: "r"}
	cfg := hostsock.Config{IPC: func(context.Context, domain.Caller, string, []byte) (int, any) {
		return 200, map[string]bool{"ok": true}
	}}
	run := func(b *testing.B, c *http.Client) {
		for b.Loop() {
			res, err := c.Post("http://clawpen/ipc/list_tasks", "application/json", strings.NewReader("{}"))
			require.NoError(b, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.Equal(b, http.StatusOK, res.StatusCode)
		}
	}
	b.Run("socket", func(b *testing.B) {
		dir, err := os.MkdirTemp("", "gwb")
		require.NoError(b, err)
		defer os.RemoveAll(dir)
		s, err := hostsock.Listen(filepath.Join(dir, "h.sock"), -1, -1, caller, cfg)
		require.NoError(b, err)
		defer s.Close()
		run(b, &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s.Path())
		}}})
	})
	b.Run("gateway", func(b *testing.B) {
		g, err := gateway.Listen("127.0.0.1:0", gateway.Config{Hosts: []string{"127.0.0.1"}})
		require.NoError(b, err)
		defer g.Close()
		s, err := hostsock.New(caller, cfg)
		require.NoError(b, err)
		defer s.Close()
		cred, end, err := g.Register(s)
		require.NoError(b, err)
		defer end()
		c, err := agent.GatewayClient(agent.Gateway{URL: "https://" + g.Addr().String(), CACert: g.CACert(), Credential: cred})
		require.NoError(b, err)
		run(b, c)
	})
}
