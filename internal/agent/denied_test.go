package agent_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
)

// A 429 the host answered with a refusal ends the run at once: the SDKs
// would retry a 429, and every retry would be refused (and audited) again.
func TestHostRefusal429IsNotRetried(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			var calls atomic.Int32
			var hc http.Client
			hc.Transport = roundTrip(func(r *http.Request) (*http.Response, error) {
				calls.Add(1)
				// No X-Should-Retry: the agent must see the refusal itself.
				body := `{"error":"denied: daily token budget of 10 reached"}` + "\n"
				return &http.Response{StatusCode: http.StatusTooManyRequests, Request: r, ContentLength: int64(len(body)),
					Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
			})
			opts := newEnv(t).opts
			opts.HTTPClient = &hc
			j := testJob("hi")
			j.Provider = provider
			_, err := agent.Run(context.Background(), j, opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "429")
			assert.Equal(t, int32(1), calls.Load(), "not retried")
		})
	}
}

// A refusal that says when to come back (the socket's request rate) is
// retried after it.
func TestHostRefusalWithRetryAfterIsRetried(t *testing.T) {
	var calls atomic.Int32
	e := newEnv(t)
	var hc http.Client
	hc.Transport = roundTrip(func(r *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			body := `{"error":"denied: more than 60 model requests at once or 1 a second in this run"}` + "\n"
			return &http.Response{StatusCode: http.StatusTooManyRequests, Request: r, ContentLength: int64(len(body)),
				Header: http.Header{"Content-Type": {"application/json"}, "Retry-After-Ms": {"10"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
		}
		return socketTransport(e).RoundTrip(r)
	})
	opts := e.opts
	opts.HTTPClient = &hc
	out, err := agent.Run(context.Background(), testJob("hi"), opts)
	require.NoError(t, err)
	assert.Equal(t, "echo: hi", out)
	assert.Equal(t, int32(2), calls.Load())
}

// The provider's own 429 (its rate limit, no "denied:") is still retried.
func TestProviderRateLimitIsRetried(t *testing.T) {
	e := newEnv(t)
	e.llm.FailNext(1, http.StatusTooManyRequests)
	assert.Equal(t, "echo: hi", e.run(t, testJob("hi")))
	assert.Len(t, e.llm.Requests(), 2)
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// socketTransport dials the env's fake host socket.
func socketTransport(e *env) http.RoundTripper {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.opts.SocketPath)
	}}
}
