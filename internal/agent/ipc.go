package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	ipcTimeout     = 60 * time.Second
	maxIPCResponse = 1 << 20
)

// callHost posts args to /ipc/<name> on the host socket. A 2xx body is the
// result; otherwise the answer's "error" text is returned unchanged (e.g.
// "denied: ..."), because the host's wording is what the model must see.
func (a *runner) callHost(ctx context.Context, name string, args any) (string, error) {
	body, err := marshalArgs(args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if name != "host_tool" {
		// A bridge tool's call is bounded by the host (the tool's timeout,
		// and CLAWPEN_APPROVAL_TIMEOUT while it waits for the owner) and by
		// the run's time limit: a bound of its own here would cut it short.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ipcTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hostBaseURL+"/ipc/"+name, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: host unreachable: %w", name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxIPCResponse))
	if err != nil {
		return "", fmt.Errorf("%s: read host answer: %w", name, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		text := strings.TrimSpace(string(data))
		if text == "" {
			text = "ok"
		}
		return text, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return "", errors.New(e.Error)
	}
	return "", fmt.Errorf("%s: host answered %s: %s", name, resp.Status, strings.TrimSpace(string(data)))
}
