package fakellm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
)

func anthropicClient(srv *fakellm.Server, key string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithoutEnvironmentDefaults(),
		aoption.WithBaseURL(srv.URL()),
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
	)
}

var bashTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "bash",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}},
}}

// call runs one request, streaming or not, and returns the assembled message.
func call(t *testing.T, c anthropic.Client, stream bool, params anthropic.MessageNewParams) (*anthropic.Message, error) {
	t.Helper()
	ctx := context.Background()
	if !stream {
		return c.Messages.New(ctx, params)
	}
	s := c.Messages.NewStreaming(ctx, params)
	defer s.Close()
	msg := &anthropic.Message{}
	for s.Next() {
		require.NoError(t, msg.Accumulate(s.Current()))
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return msg, nil
}

func TestAnthropicScript(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name+"/echo", func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			c := anthropicClient(srv, "k1")
			msg, err := call(t, c, stream, anthropic.MessageNewParams{
				Model: "claude-test", MaxTokens: 1024,
				System:   []anthropic.TextBlockParam{{Text: "be nice"}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi &amp; &lt;b&gt;"))},
			})
			require.NoError(t, err)
			assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
			require.Len(t, msg.Content, 1)
			assert.Equal(t, "echo: hi & <b>", msg.Content[0].Text)

			reqs := srv.Requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, "k1", reqs[0].Header.Get("X-Api-Key"))
			assert.Equal(t, "claude-test", reqs[0].Model)
			assert.Equal(t, "be nice", reqs[0].System)
			assert.Equal(t, stream, reqs[0].Stream)
		})

		t.Run(name+"/tool round trip", func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			c := anthropicClient(srv, "k")
			prompt := `<message sender="bob">please TOOL bash {"command":"id -u"} now
and TOOL bash {"command": "echo {x}"}</message>`
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}
			params := anthropic.MessageNewParams{Model: "m", MaxTokens: 100, Tools: []anthropic.ToolUnionParam{bashTool}}

			var uses []anthropic.ToolUseBlock
			for i := 0; i < 2; i++ {
				params.Messages = msgs
				msg, err := call(t, c, stream, params)
				require.NoError(t, err)
				require.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
				require.Len(t, msg.Content, 1)
				use := msg.Content[0].AsToolUse()
				uses = append(uses, use)
				msgs = append(msgs, msg.ToParam(),
					anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "out"+string(rune('A'+i)), false)))
			}
			assert.Equal(t, "bash", uses[0].Name)
			assert.JSONEq(t, `{"command":"id -u"}`, string(uses[0].Input))
			assert.JSONEq(t, `{"command":"echo {x}"}`, string(uses[1].Input))
			assert.NotEqual(t, uses[0].ID, uses[1].ID)

			params.Messages = msgs
			msg, err := call(t, c, stream, params)
			require.NoError(t, err)
			assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
			assert.Equal(t, "results:\noutA\noutB", msg.Content[0].Text)

			last := srv.Requests()[2]
			assert.Equal(t, []string{"bash"}, last.ToolNames())
			require.Len(t, last.Messages, 5)
			assert.Equal(t, "tool_result", last.Messages[4].Content[0].Type)
		})

		t.Run(name+"/wrong key", func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetRequiredKey("right")
			_, err := call(t, anthropicClient(srv, "wrong"), stream, anthropic.MessageNewParams{
				Model: "m", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			})
			var apiErr *anthropic.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
			assert.Contains(t, apiErr.Error(), "authentication_error")

			_, err = call(t, anthropicClient(srv, "right"), stream, anthropic.MessageNewParams{
				Model: "m", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			})
			require.NoError(t, err)
		})

		t.Run(name+"/fail next", func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			srv.FailNext(1, 529)
			params := anthropic.MessageNewParams{
				Model: "m", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			}
			_, err := call(t, anthropicClient(srv, "k"), stream, params)
			var apiErr *anthropic.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 529, apiErr.StatusCode)
			assert.Contains(t, apiErr.Error(), "overloaded_error")

			msg, err := call(t, anthropicClient(srv, "k"), stream, params)
			require.NoError(t, err)
			assert.Equal(t, "echo: x", msg.Content[0].Text)
		})
	}
}

func TestAnthropicReplyDirectives(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	c := anthropicClient(srv, "k")
	ask := func(prompt string) string {
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "m", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		})
		require.NoError(t, err)
		return msg.Content[0].Text
	}
	assert.Equal(t, "<internal>x</internal>hello", ask(`<message>REPLY &lt;internal&gt;x&lt;/internal&gt;hello</message>`))
	long := ask("REPLY_LONG 5000")
	assert.Len(t, long, 5000)
	assert.Contains(t, long, "\n\n")
	assert.Equal(t, strings.TrimSpace(long), long)
}

func TestAnthropicRejectsOrphanToolResult(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	c := anthropicClient(srv, "k")
	_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("x")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_9", "r", false)),
		},
	})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
}

func TestInvalidToolDirective(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	c := anthropicClient(srv, "k")
	_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(`TOOL bash {"command": }`))},
	})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Error(), "invalid JSON object")
}

func TestOpenAIChatCompletion(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	srv.SetRequiredKey("sk-test")
	c := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
	ctx := context.Background()

	params := openai.ChatCompletionNewParams{
		Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("sys"),
			openai.UserMessage(`run TOOL bash {"command":"date"}`),
		},
		Tools: []openai.ChatCompletionToolParam{{Function: openai.FunctionDefinitionParam{Name: "bash"}}},
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, "tool_calls", resp.Choices[0].FinishReason)
	require.Len(t, resp.Choices[0].Message.ToolCalls, 1)
	tc := resp.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "bash", tc.Function.Name)
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(tc.Function.Arguments), &args))
	assert.Equal(t, "date", args["command"])

	params.Messages = append(params.Messages, resp.Choices[0].Message.ToParam(), openai.ToolMessage("Mon", tc.ID))
	resp, err = c.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "stop", resp.Choices[0].FinishReason)
	assert.Equal(t, "results:\nMon", resp.Choices[0].Message.Content)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "Bearer sk-test", reqs[1].Header.Get("Authorization"))
	assert.Equal(t, "sys", reqs[1].System)
	assert.Equal(t, []string{"bash"}, reqs[1].ToolNames())

	bad := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("nope"), ooption.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "got %v", err)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
}

func TestStartStandalone(t *testing.T) {
	srv, err := fakellm.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	c := anthropicClient(srv, "k")
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("ping"))},
	})
	require.NoError(t, err)
	assert.Equal(t, "echo: ping", msg.Content[0].Text)
}

func TestSleepEndsWithClient(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	c := anthropicClient(srv, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("SLEEP 10m"))},
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Both SDKs list the fake's models as they list the real providers', and
// get the providers' 401 for a wrong key.
func TestModelsList(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	srv.SetRequiredKey("sk-test")
	srv.SetModels("claude-sonnet-4-5-20250929", "gpt-4.1-mini")
	ctx := context.Background()
	want := []string{"claude-sonnet-4-5-20250929", "gpt-4.1-mini"}

	ac := anthropicClient(srv, "sk-test")
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	require.NoError(t, err)
	var got []string
	for _, m := range page.Data {
		got = append(got, m.ID)
		assert.Equal(t, "model", string(m.Type))
		assert.False(t, m.CreatedAt.IsZero())
	}
	assert.Equal(t, want, got)
	assert.False(t, page.HasMore)

	oc := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
	opage, err := oc.Models.List(ctx)
	require.NoError(t, err)
	got = nil
	for _, m := range opage.Data {
		got = append(got, m.ID)
		assert.Equal(t, "model", string(m.Object))
	}
	assert.Equal(t, want, got)
	assert.Empty(t, srv.Requests(), "a listing is not a model request")

	abad := anthropicClient(srv, "nope")
	_, err = abad.Models.List(ctx, anthropic.ModelListParams{})
	var aErr *anthropic.Error
	require.ErrorAs(t, err, &aErr)
	assert.Equal(t, http.StatusUnauthorized, aErr.StatusCode)
	bad := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("nope"), ooption.WithMaxRetries(0))
	_, err = bad.Models.List(ctx)
	var oErr *openai.Error
	require.ErrorAs(t, err, &oErr)
	assert.Equal(t, http.StatusUnauthorized, oErr.StatusCode)
}
