package fakellm_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
)

// Every answer reports its usage, in both APIs, streamed or not; USAGE sets it.
func TestUsageInEveryShape(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	const prompt = "USAGE 600 45 REPLY done"

	for _, stream := range []bool{false, true} {
		msg, err := call(t, anthropicClient(srv, ""), stream, anthropic.MessageNewParams{Model: "m", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		require.NoError(t, err)
		assert.Equal(t, "done", msg.Content[0].Text)
		assert.Equal(t, int64(600), msg.Usage.InputTokens, "stream %v", stream)
		assert.Equal(t, int64(45), msg.Usage.OutputTokens, "stream %v", stream)
	}

	oc := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	res, err := oc.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "done", res.Choices[0].Message.Content)
	assert.Equal(t, int64(600), res.Usage.PromptTokens)
	assert.Equal(t, int64(45), res.Usage.CompletionTokens)

	for _, include := range []bool{false, true} {
		p := params
		if include {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		s := oc.Chat.Completions.NewStreaming(context.Background(), p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		assert.Equal(t, "done", acc.Choices[0].Message.Content)
		if include {
			assert.Equal(t, int64(600), acc.Usage.PromptTokens)
			assert.Equal(t, int64(45), acc.Usage.CompletionTokens)
		} else {
			assert.Zero(t, acc.Usage.PromptTokens, "usage only when asked for")
		}
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 5)
	assert.True(t, reqs[4].IncludeUsage)
}

func TestOpenAIStreamedToolCall(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	oc := openai.NewClient(ooption.WithBaseURL(srv.URL()+"/v1/"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`TOOL bash {"command":"echo a long enough command"}`)}})
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	require.NoError(t, s.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	tc := acc.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "bash", tc.Function.Name)
	assert.JSONEq(t, `{"command":"echo a long enough command"}`, tc.Function.Arguments)
	assert.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
}
