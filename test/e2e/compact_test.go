package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/test/harness"
)

// summaryRequests counts the agent's summary requests among reqs.
func summaryRequests(reqs []fakellm.Request) []int {
	var out []int
	for i, r := range reqs {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Text(), "<conversation>") {
			out = append(out, i)
		}
	}
	return out
}

// archived is every transcript the host archived for folder, together.
func archived(t *testing.T, h *harness.Host, folder string) string {
	dir := filepath.Join(h.Dir, "data", "transcripts", folder)
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var b strings.Builder
	for _, e := range es {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		b.Write(data)
	}
	return b.String()
}

// A conversation driven past a small CLAWPEN_CONTEXT_TOKENS: while the
// summary request fails nothing is lost (the next request carries every
// turn); then one summary request is made, the run's request carries the
// summary and the recent turns, and the archive holds every earlier turn.
func TestLongConversationIsCompacted(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_CONTEXT_TOKENS": "3000"}})
	pad := strings.Repeat("words ", 300)
	say := func(i int) {
		n := len(h.TG.SentTo(harness.OwnerID))
		h.OwnerSays(fmt.Sprintf("FACT-%d %s REPLY answer %d", i, pad, i))
		require.Contains(t, h.Replies(harness.OwnerID, n+1)[n], fmt.Sprintf("answer %d", i))
	}
	h.LLM.FailSummaries(1)
	i := 1
	for ; len(summaryRequests(h.LLM.Requests())) == 0; i++ {
		require.Less(t, i, 12, "no summary asked for after 12 turns")
		say(i)
	}
	reqs := h.LLM.Requests()
	first := summaryRequests(reqs)[0]
	require.Equal(t, len(reqs)-2, first, "the failed summary request, then the run's own")
	assert.Contains(t, reqs[len(reqs)-1].Messages[0].Text(), "FACT-1 ", "the summary failed: every turn is still sent")

	say(i)
	reqs = h.LLM.Requests()
	summaries := summaryRequests(reqs)
	require.Len(t, summaries, 2, "one more summary request")
	require.Equal(t, len(reqs)-2, summaries[1])
	run := reqs[len(reqs)-1]
	assert.True(t, strings.HasPrefix(run.Messages[0].Text(), "<conversation_summary>\nSummary of the earlier conversation. Facts: FACT-1 FACT-2"),
		run.Messages[0].Text())
	assert.Contains(t, run.Messages[len(run.Messages)-1].Text(), fmt.Sprintf("FACT-%d ", i), "the newest turn as it was")
	for _, m := range run.Messages {
		assert.NotContains(t, m.Text(), "FACT-1 words", "the oldest turn lives in the summary only")
	}
	summarised := reqs[summaries[1]].Messages[0].Text()
	whole := archived(t, h, "main")
	for j := 1; j < i; j++ {
		if strings.Contains(summarised, fmt.Sprintf("FACT-%d ", j)) {
			assert.Contains(t, whole, fmt.Sprintf("FACT-%d words", j), "the archive holds turn %d, which the summary replaced", j)
		}
	}

	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/usage")
	assert.Contains(t, harness.Plain(h.Replies(harness.OwnerID, n+1)[n]), fmt.Sprintf("%d answers) on claude-test", len(reqs)-1),
		"the summary requests were counted like any other (the failed one reported no usage)")
}
