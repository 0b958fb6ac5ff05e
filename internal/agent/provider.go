package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
)

// hostBaseURL is the base URL of every request through the host socket; the
// transport dials the socket whatever the host part says.
const hostBaseURL = "http://clawpen"

// socketClient is an HTTP client whose every connection is the unix socket at path.
func socketClient(path string) *http.Client {
	dialer := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:      4,
		ForceAttemptHTTP2: false,
	}}
}

// NewModel returns the provider named by the job ("" means anthropic), talking
// through httpClient. The agent holds no key: the host adds it.
func NewModel(provider string, httpClient *http.Client) (Model, error) {
	switch provider {
	case "", "anthropic":
		return &anthropicModel{api: apiClient{hc: httpClient, base: hostBaseURL + "/"}}, nil
	case "openai":
		return &openaiModel{api: apiClient{hc: httpClient, base: hostBaseURL + "/v1/"}}, nil
	default:
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
}

type anthropicModel struct {
	api apiClient
}

func (m *anthropicModel) Complete(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	body, err := anthropicBody(req)
	if err != nil {
		return ModelResponse{}, err
	}
	// Always streamed: the answer shows as a draft while it is written, and
	// the API refuses a non-streaming call that may run long.
	res, err := m.api.post(ctx, "v1/messages", body)
	if err != nil {
		return ModelResponse{}, fmt.Errorf("anthropic: %w", err)
	}
	defer res.Body.Close()
	events := newSSEReader(res.Body)
	var ans anthropicAnswer
	for {
		sse, err := events.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
		}
		switch sse.Type {
		case "ping", "":
			continue
		case "error":
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", streamError(sse.Data))
		}
		if len(bytes.TrimSpace(sse.Data)) == 0 {
			continue
		}
		var ev anthropicEvent
		if err := decodeEvent(sse.Data, &ev); err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
		}
		if err := ans.add(&ev); err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
		}
		if req.OnText != nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			req.OnText(ans.text())
		}
	}
	return ans.response(), nil
}

// objectOrEmpty is raw when it is a JSON object, else {}: the API accepts
// nothing else as a tool_use input, even one the model itself produced badly.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return raw
}
