package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/test/harness"
)

// TestKeylessOpenAICompatibleServer: with only OPENAI_BASE_URL set (a local
// server that wants no key) the owner gets answers, the server is asked for
// an OpenAI model, never a Claude one, and no credential is sent.
func TestKeylessOpenAICompatibleServer(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, KeylessOpenAI: true})
	h.OwnerSays("hello local model")
	h.WaitFor(harness.OwnerID, "hello local model")

	reqs := h.LLM.Requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		assert.Equal(t, "/v1/chat/completions", r.Path)
		assert.Equal(t, config.DefaultOpenAIModel, r.Model)
		assert.Empty(t, r.Header.Get("Authorization"), "no dummy key is sent")
	}
}
