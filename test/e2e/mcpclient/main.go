// Command mcpclient is an MCP client (the go-sdk's own) that the bridge
// test runs inside a sandbox against the host socket's /mcp:
//
//	mcpclient list              one "MCP-TOOL <name>" line per tool
//	mcpclient call NAME JSON    "MCP-RESULT error=<bool> <text>"
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const hostSock = "/run/clawpen/host.sock"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Println("MCP-FAILED", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", hostSock)
	}}}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://clawpen/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	switch {
	case len(args) == 1 && args[0] == "list":
		res, err := sess.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range res.Tools {
			fmt.Println("MCP-TOOL", t.Name)
		}
		return nil
	case len(args) == 3 && args[0] == "call":
		var in map[string]any
		if err := json.Unmarshal([]byte(args[2]), &in); err != nil {
			return err
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: args[1], Arguments: in})
		if err != nil {
			return err
		}
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				fmt.Printf("MCP-RESULT error=%t %s\n", res.IsError, tc.Text)
			}
		}
		return nil
	}
	return fmt.Errorf("usage: mcpclient list | call NAME JSON")
}
