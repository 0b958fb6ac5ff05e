package escape

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(ownerAttacks) }

// ownerAttacks try to reach the owner's chat with a group's words, and to
// abuse the IPC: quotas, oracles, the audit log.
func ownerAttacks() []attack {
	// The owner's chat before each attack, to look only at what came after.
	before := map[string]int{}
	mark := func(name string) func(t *testing.T, e *env) {
		return func(t *testing.T, e *env) { before[name] = len(e.h.TG.SentTo(harness.OwnerID)) }
	}
	since := func(name string, e *env) []faketg.SentMessage { return e.h.TG.SentTo(harness.OwnerID)[before[name]:] }
	var otherTaskID int64 // the "other" group's task the oracle attack asks about

	// phished runs a group whose agent fails with an error text that msg
	// crafts; the owner hears of it in the host's words only.
	phished := func(name string, msg func(e *env) string) attack {
		return attack{name: name, refusedOK: true, setup: mark(name), msg: msg,
			check: func(t *testing.T, e *env, out string) []string {
				if strings.Contains(out, "AGENT-STDOUT=HELD") {
					return nil // the sandbox kept it from writing the agent's output
				}
				if !strings.Contains(out, refusedText) {
					return []string{inconclusive + "the run did not fail"}
				}
				if !waitOwner(e, name, before, e.folder, "failed") {
					return []string{inconclusive + "the owner was never told that " + e.folder + " failed"}
				}
				return append(ownerEvidence(since(name, e)), groupEvidence(e)...)
			}}
	}
	viaStdout := func(what string) func(e *env) string {
		return func(e *env) string { return bash("./pwn agent-stdout " + what + "; echo INJECTED") }
	}

	return []attack{
		// The model's provider echoes what it could not parse in its error,
		// and the agent fails with that error: text a member wrote.
		phished("owner-phish-model-error", func(e *env) string { return modelEcho }),
		// An error event written into the agent's stdout from its sandbox.
		phished("owner-phish-agent-stdout", viaStdout("error")),
		// An event type the host does not know, carrying the same text.
		phished("owner-phish-event-type", viaStdout("type")),

		// A task whose run fails with crafted text: neither the owner's notice
		// nor /tasks shows it.
		{name: "owner-phish-task-error", setup: mark("owner-phish-task-error"), msg: func(e *env) string {
			return tool("schedule_task", map[string]any{
				// /tasks shows the prompt's first characters (as code); the
				// phish is further on.
				"prompt":        strings.Repeat("the nightly check, please. ", 4) + "\n" + modelEcho,
				"schedule_type": "once", "schedule_value": time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339),
			})
		}, want: []string{`"schedule_type":"once"`},
			check: func(t *testing.T, e *env, _ string) []string {
				name := "owner-phish-task-error"
				if !waitOwner(e, name, before, "Task #", e.folder) {
					return []string{inconclusive + "the owner was never told that the task failed"}
				}
				if _, ok := ownerCommand(e, "/tasks", e.folder); !ok {
					return []string{inconclusive + "no /tasks answer naming " + e.folder}
				}
				return ownerEvidence(since(name, e))
			}},

		// A task prompt with a link, HTML and a mention, listed in /tasks.
		{name: "owner-task-prompt-html", setup: mark("owner-task-prompt-html"), msg: func(e *env) string {
			return tool("schedule_task", map[string]any{
				"prompt":        "[Pay here](https://evil.example/pay) <b>PROMPT-MARK</b> @evil_bot",
				"schedule_type": "interval", "schedule_value": "1h",
			})
		}, want: []string{`"schedule_type":"interval"`},
			check: func(t *testing.T, e *env, _ string) []string {
				m, ok := ownerCommand(e, "/tasks", "PROMPT-MARK")
				if !ok {
					return []string{inconclusive + "/tasks never listed the prompt"}
				}
				ev := ownerEvidence([]faketg.SentMessage{m})
				if strings.Contains(m.Text, "<b>PROMPT-MARK") {
					ev = append(ev, "the prompt's HTML went out as HTML")
				}
				return ev
			}},

		// A chat title set by its members, listed in /groups.
		{name: "owner-chat-title-link", check: func(t *testing.T, e *env, _ string) []string {
			title := "[Pay here](https://evil.example/pay) <b>TITLE-MARK</b> evil.example @evil_bot"
			e.h.Say(e.chat-500000, "supergroup", title, harness.MemberID, "hello") // a chat no attack registers
			m, ok := ownerCommand(e, "/groups", "TITLE-MARK")
			if !ok {
				return []string{inconclusive + "/groups never listed the chat"}
			}
			ev := ownerEvidence([]faketg.SentMessage{m})
			if strings.Contains(m.Text, "<b>TITLE-MARK") {
				ev = append(ev, "the title's HTML went out as HTML")
			}
			return ev
		}},

		// 300 schedule_task calls in one run.
		{name: "ipc-schedule-flood", msg: func(e *env) string {
			return bash(`./pwn ipc-flood 300 schedule_task '{"prompt":"flood %N","schedule_type":"interval","schedule_value":"1h"}'`, 120)
		}, want: []string{"FLOOD schedule_task n=300"}, wait: 3 * time.Minute,
			check: func(t *testing.T, e *env, out string) []string {
				n := 0
				for _, task := range e.h.Tasks() {
					if task.Group == e.folder {
						n++
					}
				}
				var ev []string
				if n > ops.MaxTasksPerRun {
					ev = append(ev, fmt.Sprintf("one run created %d tasks", n))
				}
				if want := fmt.Sprintf("200=%d 403=%d", n, 300-n); !strings.Contains(out, want) {
					ev = append(ev, inconclusive+"the calls were not answered "+want)
				}
				return ev
			}},

		// Another group's task id must answer exactly as a missing one.
		{name: "ipc-task-id-oracle", setup: func(t *testing.T, e *env) {
			out := e.h.For(t).CLI("tasks", "add", "other", "interval", "1h", "the other group's own task")
			m := regexp.MustCompile(`#(\d+)`).FindStringSubmatch(out)
			require.NotNil(t, m, "no task id in %q", out)
			otherTaskID, _ = strconv.ParseInt(m[1], 10, 64)
		}, msg: func(e *env) string {
			id := otherTaskID
			missing := strconv.FormatInt(id+100000, 10)
			ids := strconv.FormatInt(id, 10) + " " + missing
			return bash(lines("./pwn ipc-same pause_task "+ids, "./pwn ipc-same resume_task "+ids, "./pwn ipc-same cancel_task "+ids))
		}, want: []string{"ORACLE-pause_task=HELD", "ORACLE-resume_task=HELD", "ORACLE-cancel_task=HELD"},
			check: func(t *testing.T, e *env, _ string) []string {
				for _, task := range e.h.Tasks() {
					if task.Group == "other" && task.Status != "active" {
						return []string{fmt.Sprintf("the other group's task %d is %s", task.ID, task.Status)}
					}
				}
				return nil
			}},

		// 3000 refused calls in one run.
		{name: "ipc-refusal-audit-flood", msg: func(e *env) string {
			return bash(fmt.Sprintf(`./pwn ipc-flood 3000 send_message '{"text":"x","chat_id":%d}'`, harness.OwnerID), 120)
		}, want: []string{"FLOOD send_message n=3000 200=0 403=3000"}, wait: 3 * time.Minute,
			check: func(t *testing.T, e *env, _ string) []string {
				bound := ops.MaxAuditedRefusals + 3 // and one aggregate row per decision
				var rows, agg int
				var aggReason string
				// The aggregate row is written when the run's socket has closed.
				deadline := time.Now().Add(30 * time.Second)
				for {
					rows, agg, aggReason = ipcAudit(t, e)
					if agg > 0 || rows > bound || time.Now().After(deadline) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				switch {
				case rows > bound:
					return []string{fmt.Sprintf("%d audit rows for one run's refusals", rows)}
				case agg == 0:
					return []string{inconclusive + "no aggregate audit row"}
				case !strings.Contains(aggReason, fmt.Sprintf("%d more calls", 3000-ops.MaxAuditedRefusals)):
					return []string{inconclusive + "the aggregate row does not count the rest: " + aggReason}
				}
				return nil
			}},
	}
}

// modelEcho is a TOOL directive whose object the fake model cannot parse:
// its error answer quotes it, as real providers quote what they reject.
const modelEcho = "TOOL bash {[Pay here](https://evil.example/pay) evil.example/x @evil_bot PHISH-MARK}"

// waitOwner waits until a message to the owner after before[name] contains
// all of subs.
func waitOwner(e *env, name string, before map[string]int, subs ...string) bool {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range e.h.TG.SentTo(harness.OwnerID)[before[name]:] {
			if containsAll(harness.Plain(m.Text), subs...) {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// ownerCommand sends an admin command and returns the first answer after it
// that contains sub.
func ownerCommand(e *env, cmd, sub string) (faketg.SentMessage, bool) {
	n := len(e.h.TG.SentTo(harness.OwnerID))
	e.h.OwnerSays(cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		for _, m := range e.h.TG.SentTo(harness.OwnerID)[n:] {
			if strings.Contains(harness.Plain(m.Text), sub) {
				return m, true
			}
		}
		if _, err := e.h.TG.WaitSent(ctx, harness.OwnerID, len(e.h.TG.SentTo(harness.OwnerID))+1); err != nil {
			return faketg.SentMessage{}, false
		}
	}
}

var codeRE = regexp.MustCompile(`(?s)<code>.*?</code>`)

// ownerEvidence is what in msgs shows a group's words reaching the owner, or
// an untrusted string that Telegram would make clickable: the phish's
// marker anywhere, a link, or a link-like or mention-like text outside the
// code that keeps it inert.
func ownerEvidence(msgs []faketg.SentMessage) []string {
	var ev []string
	for _, m := range msgs {
		switch {
		case strings.Contains(m.Text, "PHISH-MARK"):
			ev = append(ev, "the agent's text reached the owner: "+clip(m.Text, 400))
		case strings.Contains(m.Text, "<a "):
			ev = append(ev, "a link in the owner's chat: "+clip(m.Text, 400))
		case containsAny(codeRE.ReplaceAllString(m.Text, ""), "evil.example", "@evil_bot"):
			ev = append(ev, "linkable text outside code in the owner's chat: "+clip(m.Text, 400))
		}
	}
	return ev
}

// groupEvidence: the group's own chat gets the host's words about a failure
// too (its agent's answers are its own; the failure notice is the host's).
func groupEvidence(e *env) []string {
	for _, m := range e.h.TG.SentTo(e.chat) {
		if strings.Contains(m.Text, refusedText) && strings.Contains(m.Text, "PHISH-MARK") {
			return []string{"the agent's error text in its own chat's failure notice: " + clip(m.Text, 400)}
		}
	}
	return nil
}

// ipcAudit counts e's IPC audit rows and its aggregate rows.
func ipcAudit(t *testing.T, e *env) (rows, agg int, aggReason string) {
	st, err := store.Open(context.Background(), filepath.Join(e.h.Dir, "data", "clawpen.db"))
	require.NoError(t, err)
	defer st.Close()
	entries, err := st.AuditLog(context.Background(), 0)
	require.NoError(t, err)
	for _, r := range entries {
		if r.Group != e.folder || !strings.HasPrefix(r.Operation, "ipc.") {
			continue
		}
		rows++
		if r.Operation == "ipc.aggregate" {
			agg++
			aggReason = r.Reason
		}
	}
	return rows, agg, aggReason
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
