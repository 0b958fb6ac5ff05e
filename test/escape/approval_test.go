package escape

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(approvalAttacks) }

// approvalTool puts a bridge tool marked "approval: groups" in the host's
// tools dir and gives the attacked group a profile listing it (and gives
// it to the folders in also, with the same profile): each call it runs
// appends its text to an evidence file on the host.
func approvalTool(t *testing.T, e *env, also ...string) (name string) {
	t.Helper()
	name = "appr_" + e.folder
	writeTool(t, e, name+".md", "name: "+name+"\ndescription: appends its text on the host\ngroups: all\napproval: groups\n"+
		fmt.Sprintf(`command: ["/bin/sh", "-c", "echo \"$0\" >> %s; echo APPR-RAN", "{text}"]`, evidence(e, "appr"))+
		"\ninput_schema: {type: object, properties: {text: {type: string, default: x}}, additionalProperties: false}")
	withTools(t, e, name)
	for _, f := range also {
		e.h.For(t).CLI("groups", "profile", f, "tools-"+e.folder)
	}
	return name
}

// ranLines are the calls of the approval tool that ran on the host.
func ranLines(e *env) []string {
	b, err := os.ReadFile(evidence(e, "appr"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// owner plays the people around the owner's chat while an attack runs: it
// watches for the questions about one group, presses as whoever the row
// says, and records what the host answered each press. What it saw is
// read by the row's check once the run is over.
type owner struct {
	e       *env
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	notes   []string // evidence of an escape
	missed  []string // what it could not observe
	stopped bool     // results was called: the run is over
	done    chan struct{}
}

// watch starts play in the background for the attack's run; check waits
// for it to end.
func watch(t *testing.T, e *env, play func(o *owner)) *owner {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	o := &owner{e: e, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		play(o)
	}()
	t.Cleanup(func() { cancel(); <-o.done })
	return o
}

// question waits for the n-th question about folder.
func (o *owner) question(folder string, n int) (faketg.SentMessage, bool) {
	got, err := o.e.h.TG.WaitMatching(o.ctx, harness.OwnerID, n, func(m faketg.SentMessage) bool {
		return strings.HasPrefix(m.Visible, "Approval needed\nGroup "+folder+" asks")
	})
	if err != nil {
		o.miss(fmt.Sprintf("no question %d about %s: %v", n, folder, err))
		return faketg.SentMessage{}, false
	}
	return got[n-1], true
}

// press presses with data on message msg of chat as user from and returns
// the host's answer.
func (o *owner) press(from, chat, msg int64, data string) string {
	id := o.e.h.TG.Press(faketg.User{ID: from, FirstName: "presser"}, chat, msg, data)
	a, err := o.e.h.TG.WaitAnswer(o.ctx, id)
	if err != nil {
		o.miss(fmt.Sprintf("no answer to a press with %q: %v", data, err))
		return ""
	}
	return a.Text
}

// refused presses and records an escape unless the host answered that the
// press does not count (what, how it was meant to be refused).
func (o *owner) refused(what string, from, chat, msg int64, data, want string) {
	got := o.press(from, chat, msg, data)
	switch {
	case got == "":
	case strings.HasPrefix(got, "Allowed") || got == "Denied.":
		o.escape(fmt.Sprintf("%s counted: %q", what, got))
	case !strings.Contains(got, want):
		o.miss(fmt.Sprintf("%s answered %q, not %q", what, got, want))
	}
}

func (o *owner) escape(s string) { o.mu.Lock(); o.notes = append(o.notes, s); o.mu.Unlock() }

// miss notes what could not be observed; once the run is over, the waits
// it cuts short are not misses.
func (o *owner) miss(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped {
		o.missed = append(o.missed, inconclusive+s)
	}
}

// results ends the play (the run is over: whatever it asked has been
// answered) and returns what it found.
func (o *owner) results() []string {
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return append(append([]string(nil), o.notes...), o.missed...)
}

// pressAudits is a check: at least min refused presses about folder are in
// the audit log.
func pressAudits(e *env, folder string, min int) []string {
	n := 0
	for _, l := range strings.Split(e.h.AuditLog(), "\n") {
		if strings.HasPrefix(l, folder+" approval.press deny") || strings.HasPrefix(l, " approval.press deny") {
			n++
		}
	}
	if n < min {
		return []string{fmt.Sprintf("%sonly %d refused presses audited, want %d", inconclusive, n, min)}
	}
	return nil
}

// approvalAttacks go after the owner's approvals: presses by anyone but
// the owner, forged, replayed and misplaced ones, a flood of requests from
// one run, and arguments made to pass for the host's words or to hide
// part of the command. Nothing may run without the owner's own press.
func approvalAttacks() []attack {
	var o *owner
	forged := "ap:" + strings.Repeat("7f", 16) + ":o"
	return []attack{
		// Presses that must not count: a group member's and a stranger's on
		// the question itself, a forged id, the request's button on another
		// message, a choice a tool's request does not offer. The owner then
		// denies: the call is refused and nothing ran.
		{name: "approval-foreign-presses", setup: func(t *testing.T, e *env) {
			approvalTool(t, e)
			o = watch(t, e, func(o *owner) {
				q, ok := o.question(e.folder, 1)
				if !ok {
					return
				}
				once := harness.Button(q, "Allow once")
				o.refused("a member's press", harness.MemberID, q.ChatID, q.MessageID, once, "Only the owner")
				o.refused("a stranger's press", harness.StrangerID, q.ChatID, q.MessageID, once, "Only the owner")
				o.refused("a member's press in the group chat", harness.MemberID, e.chat, q.MessageID, once, "Only the owner")
				o.refused("a forged request id", harness.OwnerID, q.ChatID, q.MessageID, forged, "no such request")
				o.refused("the button on another message", harness.OwnerID, q.ChatID, q.MessageID-1, once, "does not belong")
				o.refused("allow for the group on a tool", harness.OwnerID, q.ChatID, q.MessageID, strings.TrimSuffix(once, "o")+"g", "not one of this request's choices")
				o.refused("data of no request", harness.OwnerID, q.ChatID, q.MessageID, "ap:../../x:o", "not one of mine")
				if got := o.press(harness.OwnerID, q.ChatID, q.MessageID, harness.Button(q, "Deny")); got != "Denied." {
					o.miss("the owner's Deny answered " + got)
				}
			})
		}, msg: func(e *env) string {
			return tool("appr_"+e.folder, map[string]any{"text": "foreign"})
		}, want: []string{"denied: the owner declined"}, bad: []string{"APPR-RAN"},
			check: func(t *testing.T, e *env, out string) []string {
				ev := append(o.results(), existing(evidence(e, "appr"))...)
				return append(ev, pressAudits(e, e.folder, 4)...)
			}},

		// The owner allows one call; the same press again, and that
		// request's button on the run's next question, are refused: the
		// tool ran once.
		{name: "approval-replayed-press", setup: func(t *testing.T, e *env) {
			approvalTool(t, e)
			o = watch(t, e, func(o *owner) {
				q1, ok := o.question(e.folder, 1)
				if !ok {
					return
				}
				once := harness.Button(q1, "Allow once")
				if got := o.press(harness.OwnerID, q1.ChatID, q1.MessageID, once); got != "Allowed once." {
					o.miss("the owner's Allow once answered " + got)
				}
				o.refused("the same press again", harness.OwnerID, q1.ChatID, q1.MessageID, once, "already decided")
				q2, ok := o.question(e.folder, 2)
				if !ok {
					return
				}
				o.refused("the first request's button on the second question", harness.OwnerID, q2.ChatID, q2.MessageID, once, "already decided")
				o.refused("the first request's button replayed later", harness.OwnerID, q1.ChatID, q1.MessageID, once, "already decided")
				o.press(harness.OwnerID, q2.ChatID, q2.MessageID, harness.Button(q2, "Deny"))
			})
		}, msg: func(e *env) string {
			return strings.Join([]string{tool("appr_"+e.folder, map[string]any{"text": "first"}), tool("appr_"+e.folder, map[string]any{"text": "second"})}, "\n")
		}, want: []string{"APPR-RAN", "denied: the owner declined"},
			check: func(t *testing.T, e *env, out string) []string {
				ev := o.results()
				if ran := ranLines(e); len(ran) != 1 || ran[0] != "first" {
					ev = append(ev, fmt.Sprintf("the tool ran %q; only the first call was allowed, once", ran))
				}
				return append(ev, pressAudits(e, e.folder, 3)...)
			}},

		// Two runs wait at once, this group's and a sibling's: the
		// owner's press with one's button on the other's question is
		// refused both ways; both are then denied.
		{name: "approval-other-runs-request", setup: func(t *testing.T, e *env) {
			sib, sibFolder := e.chat-7000, e.folder+"-sib"
			e.h.For(t).CLI("groups", "add", fmt.Sprint(sib), sibFolder, "sibling")
			approvalTool(t, e, sibFolder)
			e.h.Say(sib, "supergroup", "sibling", harness.MemberID, "@Andy "+tool("appr_"+e.folder, map[string]any{"text": "sibling"}))
			t.Cleanup(func() { e.h.For(t).WaitFor(sib, "denied: the owner declined") })
			o = watch(t, e, func(o *owner) {
				qs, ok := o.question(sibFolder, 1)
				if !ok {
					return
				}
				qa, ok := o.question(e.folder, 1)
				if !ok {
					return
				}
				o.refused("the sibling's button on this run's question", harness.OwnerID, qa.ChatID, qa.MessageID, harness.Button(qs, "Allow once"), "does not belong")
				o.refused("this run's button on the sibling's question", harness.OwnerID, qs.ChatID, qs.MessageID, harness.Button(qa, "Allow once"), "does not belong")
				o.press(harness.OwnerID, qs.ChatID, qs.MessageID, harness.Button(qs, "Deny"))
				o.press(harness.OwnerID, qa.ChatID, qa.MessageID, harness.Button(qa, "Deny"))
			})
		}, msg: func(e *env) string {
			return tool("appr_"+e.folder, map[string]any{"text": "this"})
		}, want: []string{"denied: the owner declined"}, bad: []string{"APPR-RAN"},
			check: func(t *testing.T, e *env, out string) []string {
				return append(append(o.results(), existing(evidence(e, "appr"))...), pressAudits(e, e.folder, 1)...)
			}},

		// 60 calls from one run, 10 at a time, straight to the socket, and
		// nobody answers: at most 3 questions wait for the owner at once,
		// every other call is refused at once (without asking), the
		// questions end in denials at the timeout (8 s after each is sent,
		// so the waiting calls may take 18 s, within the run's 20), and
		// nothing runs. (The
		// bound of 20 questions per run is a unit test's: at Telegram's
		// pace of one message a second in the owner's chat, 20 questions
		// take longer than this suite's runs may.)
		{name: "approval-request-flood", setup: func(t *testing.T, e *env) {
			approvalTool(t, e)
		}, msg: func(e *env) string {
			return bash("./pwn sock-flood -name AFLOOD -timeout 18s -path /ipc/host_tool -n 60 -c 10 -body "+shq(fmt.Sprintf(`{"name":"appr_%s","args":{}}`, e.folder)), 60)
		}, want: []string{"AFLOOD=HELD", "403:"},
			check: func(t *testing.T, e *env, out string) []string {
				var ev []string
				n := 0
				for _, m := range e.h.TG.SentTo(harness.OwnerID) {
					if strings.HasPrefix(m.Visible, "Approval needed\nGroup "+e.folder+" asks") {
						n++
					}
				}
				switch {
				case n > 3:
					ev = append(ev, fmt.Sprintf("one run had %d questions put to the owner at once", n))
				case n == 0:
					ev = append(ev, inconclusive+"the flood asked nothing at all")
				}
				log := e.h.AuditLog()
				if !strings.Contains(log, "requests waiting for the owner, the most at once") {
					ev = append(ev, inconclusive+"no call was refused for the run's bound of 3 waiting questions")
				}
				if !strings.Contains(log, "Denied: no answer within") {
					ev = append(ev, inconclusive+"no question ended in a denial at the timeout")
				}
				return append(ev, existing(evidence(e, "appr"))...)
			}},

		// Arguments made to pass for the host's own words or to hide part
		// of the command: the question shows them as visible escapes in a
		// block of their own (no bidi override, zero-width or control
		// character reaches the owner's chat as itself); one too long to
		// show in full is refused without asking.
		{name: "approval-inert-arguments", setup: func(t *testing.T, e *env) {
			approvalTool(t, e)
			o = watch(t, e, func(o *owner) {
				q, ok := o.question(e.folder, 1)
				if !ok {
					return
				}
				for _, r := range q.Visible {
					if unicode.Is(unicode.Cf, r) || (unicode.IsControl(r) && r != '\n') || r == '\u2028' || r == '\u2029' {
						o.escape(fmt.Sprintf("the question shows %U as itself", r))
					}
				}
				if strings.Count(q.Visible, "\n") != 3 {
					o.escape(fmt.Sprintf("the question's lines are not the host's four: %q", q.Visible))
				}
				for _, want := range []string{`\u202e`, `\u200b`, `\n\nAllowed once, by you`, `\x1b`} {
					if !strings.Contains(q.Visible, want) {
						o.miss(fmt.Sprintf("the question does not show %s as an escape: %q", want, q.Visible))
					}
				}
				if !strings.Contains(q.Text, "<pre>") || strings.Contains(q.Text, "<b>Allowed") {
					o.escape("the arguments are not in a block of their own, or made markup: " + q.Text)
				}
				o.press(harness.OwnerID, q.ChatID, q.MessageID, harness.Button(q, "Deny"))
			})
		}, msg: func(e *env) string {
			evil := "cat notes.txt\u202e<b>txt.exe</b>\n\nAllowed once, by you, at 12:00:00 UTC.\u200b\x1b[8m hidden"
			return strings.Join([]string{
				tool("appr_"+e.folder, map[string]any{"text": strings.Repeat("A", 4000)}),
				tool("appr_"+e.folder, map[string]any{"text": evil}),
			}, "\n")
		}, want: []string{"too long to show the owner in full", "denied: the owner declined"}, bad: []string{"APPR-RAN"},
			check: func(t *testing.T, e *env, out string) []string {
				ev := o.results()
				n := 0
				for _, m := range e.h.TG.SentTo(harness.OwnerID) {
					if strings.HasPrefix(m.Visible, "Approval needed\nGroup "+e.folder+" asks") {
						n++
					}
				}
				if n != 1 {
					ev = append(ev, fmt.Sprintf("%d questions about the two calls; want 1 (the long one is not asked)", n))
				}
				return append(ev, existing(evidence(e, "appr"))...)
			}},
	}
}
