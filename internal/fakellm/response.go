package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/clawpen/clawpen/internal/retry"
)

// drip waits d between two streamed chunks; false: the client went away.
func drip(ctx context.Context, d time.Duration) bool {
	return d <= 0 || retry.Sleep(ctx, d) == nil
}

func writeJSON(w http.ResponseWriter, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

func outTokens(a answer) int {
	if a.outToks > 0 {
		return a.outToks
	}
	if a.tool != nil {
		return len(a.tool.input)/4 + 10
	}
	return len(a.text)/4 + 1
}

// contentBlocks is the Anthropic content of an answer.
func contentBlocks(a answer) []map[string]any {
	if a.tool != nil {
		return []map[string]any{{
			"type":  "tool_use",
			"id":    fmt.Sprintf("toolu_%d", a.toolN),
			"name":  a.tool.name,
			"input": a.tool.input,
		}}
	}
	return []map[string]any{{"type": "text", "text": a.text, "citations": nil}}
}

func stopReason(a answer) string {
	if a.tool != nil {
		return "tool_use"
	}
	return "end_turn"
}

func writeAnthropic(w http.ResponseWriter, req Request, a answer, seq int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", fmt.Sprintf("req_fake_%d", seq))
	writeJSON(w, map[string]any{
		"id":            fmt.Sprintf("msg_fake_%d", seq),
		"type":          "message",
		"role":          "assistant",
		"model":         req.Model,
		"content":       contentBlocks(a),
		"stop_reason":   stopReason(a),
		"stop_sequence": nil,
		"usage":         map[string]any{"input_tokens": a.inToks, "output_tokens": outTokens(a)},
	})
}

// chunks splits s into pieces of at most n bytes (byte-wise is fine: the
// receiver concatenates them before interpreting anything).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// writeAnthropicStream sends the real SSE event sequence of the Messages API.
func writeAnthropicStream(ctx context.Context, w http.ResponseWriter, req Request, a answer, seq int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", fmt.Sprintf("req_fake_%d", seq))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", seq), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": a.inToks, "output_tokens": 1},
	}})
	send("ping", map[string]any{"type": "ping"})
	if a.tool != nil {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d", a.toolN), "name": a.tool.name, "input": map[string]any{},
		}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, c := range chunks(string(a.tool.input), 16) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": c}})
		}
	} else {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for i, c := range chunks(a.text, 32) {
			if i > 0 && !drip(ctx, a.drip) {
				return
			}
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": c}})
			if i == 0 && a.firstText != nil {
				a.firstText(time.Now())
			}
		}
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(a), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTokens(a)},
	})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// writeOpenAIStream sends the chunks of a streamed chat completion, and,
// when asked (stream_options.include_usage), the last chunk with the usage
// and no choices, as the API does.
func writeOpenAIStream(ctx context.Context, w http.ResponseWriter, req Request, a answer, seq int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_fake_%d", seq))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	created := time.Now().Unix()
	send := func(choices []map[string]any, usage any) {
		b, _ := json.Marshal(map[string]any{
			"id": fmt.Sprintf("chatcmpl-fake%d", seq), "object": "chat.completion.chunk", "created": created,
			"model": req.Model, "choices": choices, "usage": usage,
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []map[string]any {
		return []map[string]any{{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	finish := "stop"
	if a.tool != nil {
		finish = "tool_calls"
		send(delta(map[string]any{"tool_calls": []map[string]any{{"index": 0, "id": fmt.Sprintf("call_%d", a.toolN), "type": "function",
			"function": map[string]any{"name": a.tool.name, "arguments": ""}}}}, nil), nil)
		for _, c := range chunks(string(a.tool.input), 16) {
			send(delta(map[string]any{"tool_calls": []map[string]any{{"index": 0, "function": map[string]any{"arguments": c}}}}, nil), nil)
		}
	} else {
		for i, c := range chunks(a.text, 32) {
			if i > 0 && !drip(ctx, a.drip) {
				return
			}
			send(delta(map[string]any{"content": c}, nil), nil)
			if i == 0 && a.firstText != nil {
				a.firstText(time.Now())
			}
		}
	}
	send(delta(map[string]any{}, finish), nil)
	if req.IncludeUsage {
		send([]map[string]any{}, map[string]any{
			"prompt_tokens": a.inToks, "completion_tokens": outTokens(a), "total_tokens": a.inToks + outTokens(a),
		})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeOpenAI(w http.ResponseWriter, req Request, a answer, seq int) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	if a.tool != nil {
		finish = "tool_calls"
		msg["tool_calls"] = []map[string]any{{
			"id":       fmt.Sprintf("call_%d", a.toolN),
			"type":     "function",
			"function": map[string]any{"name": a.tool.name, "arguments": string(a.tool.input)},
		}}
	} else {
		msg["content"] = a.text
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_fake_%d", seq))
	writeJSON(w, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fake%d", seq),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage": map[string]any{
			"prompt_tokens": a.inToks, "completion_tokens": outTokens(a), "total_tokens": a.inToks + outTokens(a),
		},
	})
}
