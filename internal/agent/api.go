package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The agent talks to the model through the host socket with a client of its
// own rather than the providers' SDKs: the SDKs cover the whole API, and a
// process that makes a few requests paid for that in every sandbox — 10 MB
// more binary, about 1 ms of CPU and 3.6 MB of memory per sandbox
// (BenchmarkAgentCPU, docs/decisions.md "A lighter agent"). What reaches the
// wire is kept the SDKs' own, request for request: method, path, media
// types, body, and when a request is tried again (TestWireMatchesSDKs).
// The host forwards nothing else of the request.

const (
	// maxRetries is the SDKs' default: a request is tried at most three times.
	maxRetries = 2
	// maxEventBytes bounds one line of a streamed answer (the SDKs' bound).
	maxEventBytes = bufio.MaxScanTokenSize << 9
	// maxErrorBody bounds what is kept of an error answer's body.
	maxErrorBody = 64 << 10
)

// apiClient posts JSON to the model API behind the host socket.
type apiClient struct {
	hc   *http.Client
	base string // hostBaseURL and the provider's prefix, ending in "/"
}

// statusError is a model request the host or the provider answered with a
// status of 400 or more, after any retries.
type statusError struct {
	Method, URL string
	StatusCode  int
	Body        string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("%s %q: %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += " " + e.Body
	}
	return msg
}

// post sends body to path and returns the answer of the last try, whose body
// the caller reads and closes; an answer of 400 or more is a *statusError.
func (c apiClient) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	url := c.base + path
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("model request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		res, err := c.hc.Do(req)
		if ctx.Err() != nil {
			closeBody(res)
			return nil, ctx.Err()
		}
		if err == nil && res.StatusCode < 400 {
			return res, nil
		}
		retry := shouldRetry(res)
		var apiErr *statusError
		if err == nil {
			apiErr, err = readStatusError(req, res)
			retry = retry && (apiErr == nil || !deniedForGood(res, apiErr.Body))
		}
		if try >= maxRetries || !retry {
			if apiErr != nil {
				return nil, apiErr
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retryDelay(res, try)):
		}
	}
}

// readStatusError reads and closes the body of an answer of 400 or more.
func readStatusError(req *http.Request, res *http.Response) (*statusError, error) {
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %d: read error body: %w", req.Method, req.URL, res.StatusCode, err)
	}
	return &statusError{Method: req.Method, URL: req.URL.String(), StatusCode: res.StatusCode, Body: strings.TrimSpace(string(b))}, nil
}

// deniedForGood reports a 429 the host itself answered with a refusal
// ("denied: …") without saying when to come back, such as the daily token
// budget: the same request would get the same answer (and be audited again),
// so the run ends at once. A refusal with Retry-After (the socket's request
// rate) and a provider's own 429 are retried: waiting cures them.
func deniedForGood(res *http.Response, body string) bool {
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "" || res.Header.Get("Retry-After-Ms") != "" {
		return false
	}
	var v struct {
		Error string `json:"error"`
	}
	return json.Unmarshal([]byte(body), &v) == nil && strings.HasPrefix(v.Error, "denied:")
}

func closeBody(res *http.Response) {
	if res != nil && res.Body != nil {
		_ = res.Body.Close()
	}
}

// shouldRetry is the SDKs' rule: a connection error (no answer), what
// X-Should-Retry says, else 408, 409, 429 and 5xx. The host sets
// X-Should-Retry: false on refusals that the same request would meet again.
func shouldRetry(res *http.Response) bool {
	if res == nil {
		return true
	}
	switch res.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusConflict ||
		res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= http.StatusInternalServerError
}

// retryDelay is what the answer asks for (Retry-After-Ms, then Retry-After
// in seconds or as a date), else the SDKs' back-off: 0.5 s doubling per try,
// at most 8 s, less up to a quarter of jitter.
func retryDelay(res *http.Response, try int) time.Duration {
	if d, ok := retryAfter(res); ok {
		return max(0, d)
	}
	d := min(time.Duration(float64(500*time.Millisecond)*float64(int(1)<<min(try, 8))), 8*time.Second)
	return d - time.Duration(rand.Int64N(int64(d/4)))
}

func retryAfter(res *http.Response) (time.Duration, bool) {
	if res == nil {
		return 0, false
	}
	if v := res.Header.Get("Retry-After-Ms"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(f * float64(time.Millisecond)), true
		}
	}
	if v := res.Header.Get("Retry-After"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(f * float64(time.Second)), true
		}
		if t, err := time.Parse(time.RFC1123, v); err == nil {
			return time.Until(t), true
		}
	}
	return 0, false
}

// sseEvent is one server-sent event: its type and its data lines, each
// ended by a newline.
type sseEvent struct {
	Type string
	Data []byte
}

// sseReader reads server-sent events as the SDKs do: fields "event" and
// "data" (one optional space after the colon), comments and other fields
// ignored, an event dispatched at an empty line.
type sseReader struct {
	scn  *bufio.Scanner
	data bytes.Buffer
}

func newSSEReader(r io.Reader) *sseReader {
	scn := bufio.NewScanner(r)
	scn.Buffer(nil, maxEventBytes)
	return &sseReader{scn: scn}
}

// next returns the next event, io.EOF at the end of the stream. The data
// is valid until the following call.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	s.data.Reset()
	for s.scn.Scan() {
		line := s.scn.Bytes()
		if len(line) == 0 {
			if ev.Type == "" && s.data.Len() == 0 {
				continue
			}
			ev.Data = s.data.Bytes()
			return ev, nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.Type = string(value)
		case "data":
			s.data.Write(value)
			s.data.WriteByte('\n')
		}
	}
	if err := s.scn.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// streamError is an error event in the stream: the provider failed after
// the answer had begun.
func streamError(data []byte) error {
	return fmt.Errorf("received error while streaming: %s", strings.TrimSpace(string(data)))
}

// decodeEvent decodes one event's JSON data into v.
func decodeEvent(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("stream event: %w", err)
	}
	return nil
}
