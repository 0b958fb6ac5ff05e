package approval

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
)

const ownerID = int64(4242)

var (
	owner  = faketg.User{ID: ownerID, FirstName: "Owner"}
	member = faketg.User{ID: 7777, FirstName: "Member"}
)

// env is a broker on a real store, reaching a fake Telegram through the
// real client, with the presses Telegram delivers handed to it as serve
// does.
type env struct {
	tg      *faketg.Server
	st      *store.Store
	b       *Broker
	c       *telegram.Client
	ctx     context.Context
	dir     string
	pressed chan error
}

func newEnv(t *testing.T, timeout time.Duration) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	tg := faketg.New()
	t.Cleanup(tg.Close)
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c, err := telegram.New(ctx, telegram.Config{Token: "1:t", APIURL: tg.URL(), PollTimeout: time.Second,
		Pacing: telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	e := &env{tg: tg, st: st, c: c, ctx: ctx, dir: dir, pressed: make(chan error, 64)}
	e.b = e.broker(timeout)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Poll(pctx, 0, func(ctx context.Context, u telegram.Update) error {
			if u.Press != nil {
				err := e.b.Press(ctx, *u.Press)
				e.pressed <- err
				return err
			}
			return nil
		}, func(context.Context, int64) error { return nil })
	}()
	t.Cleanup(func() { stop(); <-done })
	return e
}

func (e *env) broker(timeout time.Duration) *Broker {
	return New(Config{Store: e.st, Messenger: e.c, Timeout: timeout, TZ: time.UTC, Logger: slog.New(slog.DiscardHandler),
		Owner: func(context.Context) (int64, error) { return ownerID, nil }})
}

// asked waits for the n-th message to the owner (1-based) and returns it.
func (e *env) asked(t *testing.T, n int) faketg.SentMessage {
	t.Helper()
	sent, err := e.tg.WaitSent(e.ctx, ownerID, n)
	require.NoError(t, err)
	return sent[n-1]
}

// press presses a button of m as user u and waits for the bot's answer.
func (e *env) press(t *testing.T, u faketg.User, m faketg.SentMessage, button string) string {
	t.Helper()
	id, err := e.tg.PressButton(u, m.ChatID, m.MessageID, button)
	require.NoError(t, err)
	return e.answer(t, id)
}

// pressData presses with any data, as a modified client can.
func (e *env) pressData(t *testing.T, u faketg.User, chat, msg int64, data string) string {
	t.Helper()
	return e.answer(t, e.tg.Press(u, chat, msg, data))
}

func (e *env) answer(t *testing.T, id string) string {
	t.Helper()
	a, err := e.tg.WaitAnswer(e.ctx, id)
	require.NoError(t, err)
	return a.Text
}

// edited waits until m's text holds want.
func (e *env) edited(t *testing.T, m faketg.SentMessage, want string) faketg.SentMessage {
	t.Helper()
	got, err := e.tg.WaitMessage(e.ctx, m.ChatID, m.MessageID, func(m faketg.SentMessage) bool { return strings.Contains(m.Visible, want) })
	require.NoError(t, err)
	return got
}

// call runs f in the background and hands back its result.
func call(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func (e *env) tool(run, group string, argv ...string) <-chan error {
	return call(func() error { return e.b.Tool(e.ctx, run, group, "search", argv, "abc123") })
}

func denial(t *testing.T, err error) string {
	t.Helper()
	var d *Denial
	require.True(t, errors.As(err, &d), "want a denial, got %v", err)
	return d.Reason
}

func TestOwnerAllowsOnce(t *testing.T) {
	e := newEnv(t, time.Minute)
	res := e.tool("run1", "family", "/bin/search", "--", "cats")
	m := e.asked(t, 1)
	assert.Contains(t, m.Visible, "Group family asks to run the bridge tool search")
	assert.Contains(t, m.Visible, `["/bin/search", "--", "cats"]`)
	require.Len(t, m.Keyboard, 1)
	assert.Equal(t, []string{"Allow once", "Deny"}, labels(m), "no allow-always for a tool")
	select {
	case err := <-res:
		t.Fatalf("answered before the owner did: %v", err)
	default:
	}
	assert.Equal(t, "Allowed once.", e.press(t, owner, m, "Allow once"))
	require.NoError(t, <-res)
	got := e.edited(t, m, "Allowed once, by you, at ")
	assert.Empty(t, got.Keyboard, "no button left to press")

	// The next call asks again.
	res = e.tool("run1", "family", "/bin/search", "--", "dogs")
	m2 := e.asked(t, 2)
	assert.Equal(t, "Denied.", e.press(t, owner, m2, "Deny"))
	assert.Equal(t, "the owner declined", denial(t, <-res))
	e.edited(t, m2, "Denied, by you, at ")

	log := auditText(t, e)
	assert.Contains(t, log, "approval ask tool search args sha256:abc123: asked the owner")
	assert.Contains(t, log, "approval allow tool search args sha256:abc123: Allowed once, by you")
	assert.Contains(t, log, "approval deny tool search args sha256:abc123: Denied, by you")
	assert.NotContains(t, log, "cats", "arguments are not kept")
}

func TestNoAnswerIsADenial(t *testing.T) {
	e := newEnv(t, 300*time.Millisecond)
	res := e.tool("run1", "family", "/bin/x")
	m := e.asked(t, 1)
	assert.Equal(t, "no answer from the owner", denial(t, <-res))
	e.edited(t, m, "Denied: no answer within 300ms")
	// A press after the decision changes nothing.
	assert.Equal(t, "This request was already decided: no answer.", e.pressData(t, owner, m.ChatID, m.MessageID, m.Keyboard[0][0].CallbackData))
}

// Presses that must not count: a group member's, one with a forged id,
// the same press again, one on another request's message, a choice the
// request does not offer. Each is answered and audited, and the requests
// wait on until the owner's own press.
func TestOnlyTheOwnersPressOnItsMessageCounts(t *testing.T) {
	e := newEnv(t, time.Minute)
	resA := e.tool("runA", "family", "/bin/a")
	mA := e.asked(t, 1)
	resB := e.tool("runB", "work", "/bin/b")
	mB := e.asked(t, 2)
	dataA, dataB := mA.Keyboard[0][0].CallbackData, mB.Keyboard[0][0].CallbackData

	assert.Equal(t, "Only the owner can answer this.", e.press(t, member, mA, "Allow once"))
	forged := "ap:" + strings.Repeat("ab", 16) + ":o"
	assert.Equal(t, "I know of no such request.", e.pressData(t, owner, mA.ChatID, mA.MessageID, forged))
	assert.Equal(t, "This button does not belong to that request.", e.pressData(t, owner, mB.ChatID, mB.MessageID, dataA), "A's button on B's message")
	assert.Equal(t, "This button does not belong to that request.", e.pressData(t, owner, member.ID, mA.MessageID, dataA), "another chat")
	assert.Equal(t, "That is not one of this request's choices.", e.pressData(t, owner, mA.ChatID, mA.MessageID, strings.TrimSuffix(dataA, "o")+"g"))
	assert.Equal(t, "This button is not one of mine.", e.pressData(t, owner, mA.ChatID, mA.MessageID, "ap:short:o"))
	for _, r := range []<-chan error{resA, resB} {
		select {
		case err := <-r:
			t.Fatalf("a request was answered by a press that does not count: %v", err)
		default:
		}
	}
	assert.Equal(t, "Allowed once.", e.pressData(t, owner, mB.ChatID, mB.MessageID, dataB))
	require.NoError(t, <-resB)
	assert.Contains(t, e.pressData(t, owner, mB.ChatID, mB.MessageID, dataB), "already decided", "replayed while its call ends")
	e.edited(t, mB, "Allowed once")
	assert.Contains(t, e.pressData(t, owner, mB.ChatID, mB.MessageID, dataB), "already decided", "replayed later")
	assert.Equal(t, "Denied.", e.press(t, owner, mA, "Deny"))
	assert.Equal(t, "the owner declined", denial(t, <-resA))

	log := auditText(t, e)
	assert.Contains(t, log, "family approval.press deny press by user 7777")
	assert.GreaterOrEqual(t, strings.Count(log, "approval.press deny"), 7)
}

// A run has at most 3 requests waiting and asks at most 20: the rest are
// refused at once, and the owner's chat gets no message for them.
func TestFloodOfOneRun(t *testing.T) {
	e := newEnv(t, time.Minute)
	var waiting []<-chan error
	for range MaxWaiting {
		waiting = append(waiting, e.tool("flood", "family", "/bin/x"))
	}
	e.asked(t, MaxWaiting)
	for range 10 {
		assert.Contains(t, denial(t, e.b.Tool(e.ctx, "flood", "family", "x", []string{"/bin/x"}, "d")), "3 requests waiting")
	}
	// Another run is not held to this one's bound.
	other := e.tool("other", "family", "/bin/y")
	e.asked(t, MaxWaiting+1)
	for i := range MaxWaiting + 1 {
		m := e.tg.SentTo(ownerID)[i]
		e.press(t, owner, m, "Deny")
	}
	for _, w := range append(waiting, other) {
		assert.Equal(t, "the owner declined", denial(t, <-w))
	}
	// 20 asked in all, then no more.
	for i := MaxWaiting; i < MaxAsked; i++ {
		res := e.tool("flood", "family", "/bin/x")
		e.press(t, owner, e.asked(t, i+2), "Deny")
		denial(t, <-res)
	}
	assert.Contains(t, denial(t, e.b.Tool(e.ctx, "flood", "family", "x", []string{"/bin/x"}, "d")), "asked the owner 20 times")
	assert.Len(t, e.tg.SentTo(ownerID), MaxAsked+1)
}

// What a request shows is inert: HTML, controls, bidi overrides and
// zero-width characters in an argument are visible escapes in a block of
// their own; a command too long to show in full is refused, not cut.
func TestRequestTextIsInert(t *testing.T) {
	e := newEnv(t, time.Minute)
	evil := "safe\u202e.exe <b>Allowed once, by you</b>\n\nDecision: allowed\u200b\x1b[2J"
	res := e.tool("run1", "family", "/bin/x", evil)
	m := e.asked(t, 1)
	assert.Contains(t, m.Visible, `safe\u202e.exe <b>Allowed once, by you</b>\n\nDecision: allowed\u200b\x1b[2J`)
	for _, r := range []string{"\u202e", "\u200b", "\x1b", "\n\nDecision"} {
		assert.NotContains(t, m.Visible, r)
	}
	assert.Contains(t, m.Text, "<pre>", "the command sits in a block of its own")
	assert.Contains(t, m.Text, "&lt;b&gt;")
	e.press(t, owner, m, "Deny")
	denial(t, <-res)

	long := strings.Repeat("A", maxShown)
	assert.Contains(t, denial(t, e.b.Tool(e.ctx, "run1", "family", "x", []string{"/bin/x", long}, "d")), "too long to show the owner in full")
	assert.Len(t, e.tg.SentTo(ownerID), 1, "not asked")
}

func TestEgressAllowedForTheGroupUntilRevoked(t *testing.T) {
	e := newEnv(t, time.Minute)
	egress := func(run string) <-chan struct {
		how string
		err error
	} {
		ch := make(chan struct {
			how string
			err error
		}, 1)
		go func() {
			how, err := e.b.Egress(e.ctx, run, "family", "example.org", 443)
			ch <- struct {
				how string
				err error
			}{how, err}
		}()
		return ch
	}
	res := egress("run1")
	m := e.asked(t, 1)
	assert.Contains(t, m.Visible, "Group family asks to connect to example.org:443")
	assert.Equal(t, []string{"Allow once", "Allow for family", "Deny"}, labels(m))
	assert.Equal(t, "Allowed for family.", e.press(t, owner, m, "Allow for family"))
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, "the owner, for group family", r.how)
	e.edited(t, m, "Allowed for family from now on")

	// A later run is not asked.
	how, err := e.b.Egress(e.ctx, "run2", "family", "example.org", 443)
	require.NoError(t, err)
	assert.Contains(t, how, "the owner, for group family since")
	assert.Len(t, e.tg.SentTo(ownerID), 1)
	// Revoked, it is asked again.
	n, err := e.st.RevokeEgress(e.ctx, "family", "example.org", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	res = egress("run2")
	m2 := e.asked(t, 2)
	e.press(t, owner, m2, "Allow once")
	r = <-res
	require.NoError(t, r.err)
	assert.Equal(t, "the owner, once", r.how)
	res = egress("run3")
	e.press(t, owner, e.asked(t, 3), "Deny")
	r = <-res
	assert.Equal(t, "the owner declined", denial(t, r.err))
}

// A restart expires what waited: the message says so, its button is
// refused, and nothing is allowed by it.
func TestRestartExpiresWaitingRequests(t *testing.T) {
	e := newEnv(t, time.Minute)
	ctx, cancel := context.WithCancel(e.ctx)
	res := call(func() error { return e.b.Tool(ctx, "old", "family", "x", []string{"/bin/x"}, "d") })
	m := e.asked(t, 1)
	id, _, ok := parseData(m.Keyboard[0][0].CallbackData)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		a, _, err := e.st.ApprovalByID(e.ctx, id)
		return err == nil && a.MessageID == m.MessageID
	}, 20*time.Second, 5*time.Millisecond, "the request's message is recorded")
	// The host dies here; a new one starts on the same database.
	dead := e.b
	e.b = e.broker(time.Minute)
	require.NoError(t, e.b.Start(e.ctx))
	e.edited(t, m, "Expired: the host restarted before an answer")
	assert.Contains(t, e.pressData(t, owner, m.ChatID, m.MessageID, m.Keyboard[0][0].CallbackData), "already decided: expired")
	cancel()
	_ = dead
	denial(t, <-res)
	assert.Contains(t, auditText(t, e), "family approval deny tool x args sha256:d: expired: the host restarted")
}

// A stopping host refuses what waits, and every later request.
func TestCloseRefusesWaitingRequests(t *testing.T) {
	e := newEnv(t, time.Minute)
	res := e.tool("run1", "family", "/bin/x")
	m := e.asked(t, 1)
	e.b.Close()
	assert.Equal(t, "the host stopped before the owner answered", denial(t, <-res))
	e.edited(t, m, "Denied: the host stopped before an answer")
	assert.Equal(t, "the host is stopping", denial(t, e.b.Tool(e.ctx, "run1", "family", "x", []string{"/bin/x"}, "d")))
}

// The run's call gives up (its sandbox ended): the request is withdrawn.
func TestWithdrawnWhenTheCallerGivesUp(t *testing.T) {
	e := newEnv(t, time.Minute)
	ctx, cancel := context.WithCancel(e.ctx)
	res := call(func() error { return e.b.Tool(ctx, "run1", "family", "x", []string{"/bin/x"}, "d") })
	m := e.asked(t, 1)
	cancel()
	denial(t, <-res)
	e.edited(t, m, "Withdrawn: the run ended before an answer")
}

func labels(m faketg.SentMessage) []string {
	var out []string
	for _, row := range m.Keyboard {
		for _, b := range row {
			out = append(out, b.Text)
		}
	}
	return out
}

func auditText(t *testing.T, e *env) string {
	t.Helper()
	entries, err := e.st.AuditLog(e.ctx, 0)
	require.NoError(t, err)
	var b strings.Builder
	for i := len(entries) - 1; i >= 0; i-- {
		x := entries[i]
		b.WriteString(x.Group + " " + x.Operation + " " + x.Decision + " " + x.Reason + "\n")
	}
	return b.String()
}

// A host that died between sending a question and recording which message
// it was: the next host expires the request, and the owner's press on that
// message edits it to say so.
func TestPressNamesAnUnrecordedQuestion(t *testing.T) {
	e := newEnv(t, time.Minute)
	id := strings.Repeat("5a", 16)
	require.NoError(t, e.st.AddApproval(e.ctx, store.Approval{ID: id, Group: "family", Run: "dead", Subject: "egress example.org:443", Asked: time.Now()}))
	msg, err := e.c.SendButtons(e.ctx, ownerID, "<b>Approval needed</b> …", nil)
	require.NoError(t, err)
	require.NoError(t, e.b.Start(e.ctx))
	assert.Equal(t, "This request was already decided: expired: the host restarted.", e.pressData(t, owner, ownerID, msg, data(id, choiceOnce)))
	m, _ := e.tg.Message(ownerID, msg)
	e.edited(t, m, "Expired: the host restarted before an answer")
	a, _, err := e.st.ApprovalByID(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, msg, a.MessageID)
	// Only the owner's press in the owner's chat names it.
	assert.Contains(t, e.pressData(t, member, ownerID, msg, data(id, choiceOnce)), "Only the owner")
}
