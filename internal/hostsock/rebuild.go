package hostsock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Policy is what a model request may ask of the provider. The proxy does not
// forward what the sandbox sent: it decodes the request into the fields it
// knows and encodes a new one from them, so whatever it does not know (an
// unknown field, a duplicate or differently cased key, a server-side tool)
// never reaches the provider.
type Policy struct {
	// Model replaces the model the request names.
	Model string
	// MaxTokens caps max_tokens (OpenAI: max_tokens and max_completion_tokens).
	MaxTokens int64
}

// requestError is a request the proxy will not forward: 400 when it is
// malformed, 403 when it asks for something the policy does not allow.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &requestError{status: 400, msg: fmt.Sprintf(format, args...)}
}

func denied(format string, args ...any) error {
	return &requestError{status: 403, msg: "denied: " + fmt.Sprintf(format, args...)}
}

// quote shows a sandbox-chosen name in a refusal: quoted, and short, since
// refusals reach the host's log and audit log.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// decodeBody decodes a request body into v, turning the decoder's errors into
// the proxy's 400s (a refusal raised while decoding passes through).
func decodeBody(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var re *requestError
	if errors.As(err, &re) {
		return re
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return malformed("field %s must not be a JSON %s", te.Field, te.Value)
		}
		return malformed("body must be a JSON object, not a %s", te.Value)
	}
	return malformed("body is not valid JSON: %v", err)
}

// encode writes v as JSON without HTML escaping (which would only grow the body).
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode rebuilt request: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// capTokens reads a token count: a positive whole number, capped at limit. A
// number too large for any integer type is capped too.
func capTokens(field string, n json.Number, limit int64) (int64, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, malformed("%s must be a number", field)
	}
	if f < 1 || f != math.Trunc(f) {
		return 0, malformed("%s must be a positive whole number", field)
	}
	if f >= float64(limit) {
		return limit, nil
	}
	return int64(f), nil
}

// textOrList is a message's content in either API: a string or an array of
// items (Anthropic's content blocks, OpenAI's content parts).
type textOrList[T listItem] struct {
	text  *string
	items []T
}

// listItem names, for errors, what a content array holds.
type listItem interface{ listName() string }

func (c *textOrList[T]) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = textOrList[T]{text: &s}
	case '[':
		var items []T
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		*c = textOrList[T]{items: items}
	default:
		var zero T
		return malformed("content must be a string or an array of %s", zero.listName())
	}
	return nil
}

func (c textOrList[T]) MarshalJSON() ([]byte, error) {
	if c.text != nil {
		return json.Marshal(*c.text)
	}
	if c.items == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.items)
}

// firstByte is the first non-space byte of a JSON value.
func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
