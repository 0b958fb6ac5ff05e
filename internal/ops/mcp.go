package ops

// The bridge tools as an MCP server (Streamable HTTP, POST /mcp on a run's
// host socket), for agents that speak MCP rather than clawpen's IPC: the
// same tools, listed for the socket's group only, and every call, listed
// or not, goes through HostTool with the same checks, refusals and audit.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawpen/clawpen/internal/domain"
)

// MCP is the MCP server of caller c's socket. Stateless: each POST builds
// the list from the definitions and the group's profile as they are then,
// and GET (a server-sent event stream) is refused, so the socket stays
// POST-only.
func (s *Service) MCP(c domain.Caller) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server { return s.mcpServer(r.Context(), c) },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: maxMCPBody})
}

// maxMCPBody bounds one MCP request, as the socket bounds an IPC body.
const maxMCPBody = 1 << 20

func (s *Service) mcpServer(ctx context.Context, c domain.Caller) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "clawpen", Title: "clawpen host bridge tools", Version: "1"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	listed := map[string]bool{}
	if prof, err := s.profileOf(ctx, c); err == nil {
		for _, jt := range s.ToolsFor(c, prof) {
			desc := jt.Description
			if jt.Guidance != "" {
				desc += "\n\n" + jt.Guidance
			}
			listed[jt.Name] = true
			srv.AddTool(&mcp.Tool{Name: jt.Name, Description: desc, InputSchema: json.RawMessage(jt.InputSchema)}, s.mcpCall(c))
		}
	}
	// A call of a tool that is not listed is answered by HostTool too (a
	// refusal, audited), not by the SDK's "unknown tool".
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" && !listed[p.Name] {
				return s.mcpCall(c)(ctx, &mcp.CallToolRequest{Params: p})
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// mcpCall answers tools/call as /ipc/host_tool would: the tool's answer
// as JSON text, or the same error text (a refusal "denied: …") as a tool
// error.
func (s *Service) mcpCall(c domain.Caller) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := s.HostTool(ctx, c, req.Params.Name, req.Params.Arguments)
		if err != nil {
			var dn denied
			var in invalid
			msg := "the host could not complete host_tool; see its log"
			switch {
			case errors.As(err, &dn):
				msg = dn.Error()
			case errors.As(err, &in):
				msg = in.msg
			default:
				s.cfg.Logger.Error("bridge tool call failed", "group", c.Group, "tool", req.Params.Name, "err", err)
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
}
