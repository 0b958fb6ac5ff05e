package agent

// A long conversation is compacted, not cut (DESIGN.md, "Agent runner"):
// when a run's conversation is reckoned past the job's ContextTokens, the
// older turns are replaced by a summary the model writes of them, and the
// recent turns stay as they were. Only when the host archived the whole
// transcript before the run (Job.Archived): no turn is dropped that the
// archive does not hold. A summary that cannot be had leaves the
// conversation whole; the next run tries again.

import (
	"context"
	"fmt"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
)

// summarySystem instructs the summary request.
const summarySystem = `You summarise a conversation so that it can go on without its older turns. ` +
	`Keep every fact, name, number, date, decision, request, promise and open question, who said what, ` +
	`and what the tools that were run found. Leave out pleasantries. Write plain text, as short as the content allows.`

// Bounds of a summary request: its answer, and each tool result or input
// as the older turns are written out for it (the summary keeps what a
// result found, not every byte of it).
const (
	summaryMaxTokens = 4096
	maxShownInTurn   = 4 << 10
)

// conversationBytes is what the estimate counts of msgs and system: their
// text, tool names and inputs, and a little for each block's framing. The
// host reckons from the transcript's file, which is at least this.
func conversationBytes(system string, msgs []Message) int64 {
	n := int64(len(system))
	for _, m := range msgs {
		for _, b := range m.Content {
			n += int64(len(b.Text)+len(b.Input)+len(b.Name)) + 16
		}
	}
	return n
}

// compactCut is where the recent turns msgs keeps verbatim begin: at a
// prompt (a user message that answers no tool call, so a tool call and
// its result are never parted), as far back as the recent part stays
// within half the budget; always the last prompt. 0: nothing older to
// summarise.
func compactCut(msgs []Message, budget int64) int {
	cut, size := 0, int64(0)
	for i := len(msgs) - 1; i >= 0; i-- {
		size += conversationBytes("", msgs[i:i+1])
		if msgs[i].Role != RoleUser || msgs[i].hasToolResult() {
			continue
		}
		if cut > 0 && domain.EstimateTokens(size) > budget/2 {
			break
		}
		cut = i
	}
	return cut
}

// compact replaces the turns before the recent ones with the model's
// summary of them, when the conversation is reckoned past the job's
// budget and the host archived the transcript. It returns msgs unchanged
// when it need not or cannot (and says why in the log).
func (a *runner) compact(ctx context.Context, j domain.Job, model Model, system string, msgs []Message) []Message {
	budget := j.ContextTokens
	if budget <= 0 {
		budget = domain.DefaultContextTokens
	}
	if domain.EstimateTokens(conversationBytes(system, msgs)) <= budget {
		return msgs
	}
	if !j.Archived {
		a.log.Warn("the conversation is past the context budget, but the host archived no transcript: not compacted")
		return msgs
	}
	cut := compactCut(msgs, budget)
	if cut == 0 {
		return msgs
	}
	req := ModelRequest{Model: j.Model, MaxTokens: summaryMaxTokens, System: summarySystem,
		Messages: []Message{{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "<conversation>\n" + writeOut(msgs[:cut]) +
			"</conversation>\n\nSummarise the conversation above."}}}}}
	if j.MaxTokens > 0 {
		req.MaxTokens = min(summaryMaxTokens, j.MaxTokens)
	}
	resp, err := model.Complete(ctx, req)
	summary := strings.TrimSpace(Message{Content: resp.Content}.text())
	if err != nil || summary == "" {
		a.log.Warn("no summary of the older turns: the conversation is kept whole, and compacted at a later run", "err", err)
		return msgs
	}
	a.log.Info("conversation compacted", "turns_summarised", cut, "turns_kept", len(msgs)-cut)
	// The summary goes at the head of the first prompt kept, so the turns
	// still alternate and begin with the user's.
	first := msgs[cut]
	first.Content = append([]Block{{Type: BlockText, Text: "<conversation_summary>\n" + summary + "\n</conversation_summary>"}}, first.Content...)
	return append([]Message{first}, msgs[cut+1:]...)
}

// writeOut writes msgs as text for the summary request: each turn with
// its role, tool calls and their results with it.
func writeOut(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, bl := range m.Content {
			switch bl.Type {
			case BlockText:
				fmt.Fprintf(&b, "[%s]\n%s\n", m.Role, bl.Text)
			case BlockToolUse:
				fmt.Fprintf(&b, "[assistant runs the tool %s]\n%s\n", bl.Name, capText(string(bl.Input), maxShownInTurn))
			case BlockToolResult:
				kind := "result"
				if bl.IsError {
					kind = "error"
				}
				fmt.Fprintf(&b, "[tool %s]\n%s\n", kind, capText(bl.Text, maxShownInTurn))
			}
		}
	}
	return b.String()
}
