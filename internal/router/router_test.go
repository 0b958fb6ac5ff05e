package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/store"
)

// The router's decisions, each against a real SQLite store: what is stored,
// what calls the agent, who may run commands, what one run sees and where
// the cursor ends up.

const (
	owner    = int64(42) // the owner's user id, and so the main chat's id
	member   = int64(7)
	other    = int64(8)
	stranger = int64(99)
	family   = int64(-100) // a registered group chat
	unknown  = int64(-300) // a group chat nobody registered
)

// recorder is a Messenger that records the typing it is asked to show.
// Nothing here runs Deliver: what the router decided to say is its outbox
// (deliver_test.go covers the way out).
type recorder struct {
	mu     sync.Mutex
	typing []int64
}

func (m *recorder) Send(context.Context, int64, int, string) error {
	return errors.New("these tests read the outbox; nothing delivers")
}

func (m *recorder) SendFile(context.Context, int64, int, string, string, []byte, string) error {
	return errors.New("these tests read the outbox; nothing delivers")
}

func (m *recorder) Typing(_ context.Context, chatID int64, _ int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.typing = append(m.typing, chatID)
	return nil
}

func (m *recorder) typed() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int64(nil), m.typing...)
}

// agents answers every run with answer, or fails it with err, and records
// the requests.
type agents struct {
	mu     sync.Mutex
	answer string
	err    error
	reqs   []runner.Request
}

func (a *agents) Start(_ context.Context, req runner.Request) *runner.Invocation {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	answer, err := a.answer, a.err
	a.mu.Unlock()
	run := runner.NewInvocation()
	if err != nil {
		run.Finish(runner.Answer{}, err)
	} else {
		run.Finish(runner.Answer{Text: answer}, nil)
	}
	return run
}

func (a *agents) Forget(string) (bool, error) { return false, nil }

func (a *agents) Warm() ([]string, int) { return nil, 0 }

func (a *agents) requests() []runner.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]runner.Request(nil), a.reqs...)
}

type fixture struct {
	st     *store.Store
	r      *Router
	msgr   *recorder
	agents *agents

	mu     sync.Mutex
	nextID int64
}

// newFixture is a router whose owner is known, with the main group and the
// family group (sender policy familyPolicy, none when empty) registered.
func newFixture(t *testing.T, familyPolicy string, configure ...func(*Config)) *fixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.PutGroup(ctx, domain.Group{ChatID: owner, Name: "main", Folder: domain.MainFolder}))
	g := domain.Group{ChatID: family, Name: "Family", Folder: "family"}
	if familyPolicy != "" {
		g.Policy = []byte(familyPolicy)
	}
	require.NoError(t, st.PutGroup(ctx, g))

	f := &fixture{st: st, msgr: &recorder{}, agents: &agents{answer: "the answer"}}
	// The router is not Run: its queue only records which groups wait, and
	// the tests run a group's turn themselves (pending).
	cfg := Config{
		Store: st, Messenger: f.msgr, Agents: f.agents, OwnerID: owner,
		Ops:           ops.New(ops.Config{Store: st, GroupsDir: t.TempDir(), Loc: time.UTC, Logger: slog.New(slog.DiscardHandler)}),
		AssistantName: "Andy", BotUsername: "andy_test_bot",
		TZ: time.UTC, Logger: slog.New(slog.DiscardHandler),
	}
	for _, c := range configure {
		c(&cfg)
	}
	f.r, err = New(ctx, cfg)
	require.NoError(t, err)
	return f
}

// say hands the router one message with a fresh message id.
func (f *fixture) say(t *testing.T, in domain.Inbound) domain.Inbound {
	t.Helper()
	f.mu.Lock()
	f.nextID++
	in.MessageID = f.nextID
	f.mu.Unlock()
	f.handle(t, in)
	return in
}

// handle hands the router in as it is (a redelivery keeps its message id).
func (f *fixture) handle(t *testing.T, in domain.Inbound) {
	t.Helper()
	if in.ChatType == "" {
		in.ChatType = "supergroup"
	}
	if in.SenderName == "" {
		in.SenderName = fmt.Sprintf("user %d", in.SenderID)
	}
	if in.Time.IsZero() {
		in.Time = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	}
	require.NoError(t, f.r.Handle(t.Context(), in))
}

// kicks are the groups whose queue was woken: their turn waits.
func (f *fixture) kicks() []string {
	return slices.Sorted(maps.Keys(f.r.q.stats().Waiting))
}

func (f *fixture) stored(t *testing.T, chatID int64) []domain.Message {
	t.Helper()
	msgs, err := f.st.MessagesAfter(t.Context(), chatID, 0, 0)
	require.NoError(t, err)
	return msgs
}

// outbox is what the router queued for chatID, in order.
func (f *fixture) outbox(t *testing.T, chatID int64) []string {
	t.Helper()
	rows, err := f.st.PendingOutboxOf(t.Context(), chatID)
	require.NoError(t, err)
	var texts []string
	for _, o := range rows {
		texts = append(texts, o.Text)
	}
	return texts
}

func (f *fixture) cursor(t *testing.T, folder string) int64 {
	t.Helper()
	c, err := f.st.Cursor(t.Context(), folder)
	require.NoError(t, err)
	return c
}

func (f *fixture) audited(t *testing.T, op, decision string) []domain.AuditEntry {
	t.Helper()
	log, err := f.st.AuditLog(t.Context(), 0)
	require.NoError(t, err)
	var out []domain.AuditEntry
	for _, e := range log {
		if e.Operation == op && e.Decision == decision {
			out = append(out, e)
		}
	}
	return out
}

// A message in a group chat: kept or not, and calling the agent or not, by
// the group's registration, its sender policy and the message's signals.
func TestGroupMessageStoredAndTriggered(t *testing.T) {
	const allowMember = `{"allow":[7]}`
	tests := []struct {
		name          string
		policy        string // the family group's sender policy
		in            domain.Inbound
		stored, fires bool
	}{
		{name: "trigger word in a supergroup", in: domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy what is the time?"}, stored: true, fires: true},
		{name: "trigger word in a basic group, any case", in: domain.Inbound{ChatID: family, ChatType: "group", SenderID: member, Text: "hey @andy, help"}, stored: true, fires: true},
		{name: "no trigger: kept as context", in: domain.Inbound{ChatID: family, SenderID: member, Text: "dinner at eight"}, stored: true},
		{name: "trigger word inside a longer word", in: domain.Inbound{ChatID: family, SenderID: member, Text: "@Andybot hi"}, stored: true},
		{name: "the assistant's name without the @", in: domain.Inbound{ChatID: family, SenderID: member, Text: "Andy is here"}, stored: true},
		{name: "mention of the bot", in: domain.Inbound{ChatID: family, SenderID: member, Text: "@andy_test_bot hi", MentionsBot: true}, stored: true, fires: true},
		{name: "the bot's username as text", in: domain.Inbound{ChatID: family, SenderID: member, Text: "ask @andy_test_bot"}, stored: true, fires: true},
		{name: "reply to the bot", in: domain.Inbound{ChatID: family, SenderID: member, Text: "thanks", ReplyToBot: true}, stored: true, fires: true},
		{name: "another bot's message is not kept", in: domain.Inbound{ChatID: family, SenderID: 555, SenderIsBot: true, Text: "@Andy obey"}},
		{name: "a group chat is never main, whatever its id", in: domain.Inbound{ChatID: owner, ChatType: "group", SenderID: member, Text: "@Andy hi"}},
		{name: "unregistered chat: nothing kept", in: domain.Inbound{ChatID: unknown, SenderID: member, Text: "@Andy hi"}},
		{name: "allowed sender calls the agent", policy: allowMember, in: domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"}, stored: true, fires: true},
		{name: "sender not allowed: context only", policy: allowMember, in: domain.Inbound{ChatID: family, SenderID: other, Text: "@Andy hi"}, stored: true},
		{name: "sender not allowed, drop mode: not kept", policy: `{"allow":[7],"mode":"drop"}`, in: domain.Inbound{ChatID: family, SenderID: other, Text: "@Andy hi"}},
		{name: "the owner always calls the agent", policy: `{"allow":[],"mode":"drop"}`, in: domain.Inbound{ChatID: family, SenderID: owner, Text: "@Andy hi"}, stored: true, fires: true},
		{name: "malformed policy fails closed: members are context", policy: `{"allow":`, in: domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"}, stored: true},
		{name: "malformed policy: the owner still calls the agent", policy: `{"allow":`, in: domain.Inbound{ChatID: family, SenderID: owner, Text: "@Andy hi"}, stored: true, fires: true},
		{name: "an admin command in a group is dropped", in: domain.Inbound{ChatID: family, SenderID: member, Text: "/unregister family"}},
		{name: "an admin command of the owner's in a group is dropped", in: domain.Inbound{ChatID: family, SenderID: owner, Text: "/unregister family"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.policy)
			f.say(t, tc.in)

			msgs := f.stored(t, tc.in.ChatID)
			if !tc.stored {
				assert.Empty(t, msgs)
				assert.Empty(t, f.kicks())
				return
			}
			require.Len(t, msgs, 1)
			assert.Equal(t, tc.in.Text, msgs[0].Text)
			assert.Equal(t, tc.fires, msgs[0].Triggered, "stored as calling the agent")
			if tc.fires {
				assert.Equal(t, []string{"family"}, f.kicks())
			} else {
				assert.Empty(t, f.kicks())
			}
			assert.Empty(t, f.outbox(t, tc.in.ChatID), "the router itself says nothing in a group")
			g, ok, err := f.st.GroupByFolder(t.Context(), "family")
			require.NoError(t, err)
			require.True(t, ok, "a command in a group changed nothing")
			assert.Equal(t, family, g.ChatID)
		})
	}
}

// Every chat is recorded (for /groups), but an unregistered one only by its
// metadata; a slash command outside main is audited as denied.
func TestChatsRecordedAndCommandsOutsideMainAudited(t *testing.T) {
	f := newFixture(t, "")
	f.say(t, domain.Inbound{ChatID: unknown, ChatTitle: "Strangers", SenderID: stranger, Text: "/register -300 strangers"})
	f.say(t, domain.Inbound{ChatID: family, ChatTitle: "Family", SenderID: member, Text: "/status"})

	chats, err := f.st.ListChats(t.Context())
	require.NoError(t, err)
	titles := map[int64]string{}
	for _, c := range chats {
		titles[c.ID] = c.Title
	}
	assert.Equal(t, map[int64]string{unknown: "Strangers", family: "Family"}, titles)
	assert.Empty(t, f.stored(t, unknown))
	_, ok, err := f.st.GroupByChat(t.Context(), unknown)
	require.NoError(t, err)
	assert.False(t, ok, "not registered by a stranger's command")
	denied := f.audited(t, "command", "deny")
	require.Len(t, denied, 1, "the registered group's command; the unregistered chat is not looked at")
	assert.Equal(t, "family", denied[0].Group)
}

// In the owner's private chat every message calls the agent, admin commands
// are run instead of stored, and nobody else is heard.
func TestPrivateChat(t *testing.T) {
	tests := []struct {
		name       string
		in         domain.Inbound
		stored     bool   // kept in main, calling the agent
		replyHas   string // what the router answers in the chat ("" = nothing)
		deniedNote bool   // audited as a denied private message
	}{
		{name: "the owner's message calls the agent", in: domain.Inbound{ChatID: owner, SenderID: owner, Text: "what is on today?"}, stored: true},
		{name: "the owner's command runs", in: domain.Inbound{ChatID: owner, SenderID: owner, Text: "/help"}, replyHas: "Commands:"},
		{name: "a command addressed to the bot runs", in: domain.Inbound{ChatID: owner, SenderID: owner, Text: "/groups@andy_test_bot"}, replyHas: "Registered groups:"},
		{name: "a command for another bot goes to the agent", in: domain.Inbound{ChatID: owner, SenderID: owner, Text: "/help@other_bot"}, stored: true},
		{name: "a slash word that is no command goes to the agent", in: domain.Inbound{ChatID: owner, SenderID: owner, Text: "/shrug whatever"}, stored: true},
		{name: "a stranger is ignored", in: domain.Inbound{ChatID: stranger, SenderID: stranger, Text: "hello"}, deniedNote: true},
		{name: "a stranger's command is ignored", in: domain.Inbound{ChatID: stranger, SenderID: stranger, Text: "/unregister family"}, deniedNote: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			tc.in.ChatType = "private"
			f.say(t, tc.in)

			msgs := f.stored(t, tc.in.ChatID)
			if tc.stored {
				require.Len(t, msgs, 1)
				assert.True(t, msgs[0].Triggered)
				assert.Equal(t, []string{domain.MainFolder}, f.kicks())
			} else {
				assert.Empty(t, msgs)
				assert.Empty(t, f.kicks())
			}
			replies := f.outbox(t, tc.in.ChatID)
			if tc.replyHas == "" {
				assert.Empty(t, replies)
			} else {
				require.Len(t, replies, 1)
				assert.Contains(t, replies[0], tc.replyHas)
			}
			assert.Equal(t, tc.deniedNote, len(f.audited(t, "telegram.private", "deny")) == 1)
			_, ok, err := f.st.GroupByFolder(t.Context(), "family")
			require.NoError(t, err)
			assert.True(t, ok, "nothing unregistered")
		})
	}
}

// A redelivered update (its offset was not saved before a crash) neither
// stores its message twice nor runs its command twice.
func TestRedeliveryHandledOnce(t *testing.T) {
	f := newFixture(t, "")
	msg := f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"})
	f.handle(t, msg)
	assert.Len(t, f.stored(t, family), 1)
	assert.Equal(t, []string{"family"}, f.kicks(), "woken once")

	cmd := f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/unregister family"})
	require.NoError(t, f.st.PutGroup(t.Context(), domain.Group{ChatID: family, Name: "Family", Folder: "family"}))
	f.handle(t, cmd)
	_, ok, err := f.st.GroupByFolder(t.Context(), "family")
	require.NoError(t, err)
	assert.True(t, ok, "registered again in between, and not unregistered by the redelivery")
	assert.Len(t, f.outbox(t, owner), 1, "one answer")
}

// Before anyone owns the bot only "/pair CODE" is heard, and only once.
func TestPairing(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	r, err := New(ctx, Config{Store: st, Messenger: &recorder{}, Agents: &agents{}, AssistantName: "Andy", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	code := r.PairingCode()
	require.NotEmpty(t, code)

	private := func(sender int64, text string) {
		require.NoError(t, r.Handle(ctx, domain.Inbound{ChatID: sender, ChatType: "private", MessageID: int64(len(text)), SenderID: sender, Text: text}))
	}
	private(stranger, "hello")
	private(stranger, "/pair WRONGCODE")
	who, err := r.Owner(ctx)
	require.NoError(t, err)
	assert.Zero(t, who)

	private(owner, "/pair "+strings.ToLower(code))
	who, err = r.Owner(ctx)
	require.NoError(t, err)
	assert.Equal(t, owner, who)
	assert.Empty(t, r.PairingCode(), "the code is used up")
	main, ok, err := st.GroupByFolder(ctx, domain.MainFolder)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, owner, main.ChatID, "the owner's private chat is main")

	private(stranger, "/pair "+code)
	who, err = r.Owner(ctx)
	require.NoError(t, err)
	assert.Equal(t, owner, who, "a second pairing changes nothing")
}

// One run sees everything after the cursor up to the last message that
// called the agent (at most MaxContext of them); its answer and the new
// cursor are recorded together.
func TestPendingRunWindow(t *testing.T) {
	tests := []struct {
		name       string
		texts      []string // the family group's messages, in order; "@Andy" calls
		maxContext int
		wantRun    bool
		wantSeen   []string // messages in the run's prompt
		wantCursor int      // index of the message the cursor ends on; -1: none
	}{
		{name: "nothing calls: no run", texts: []string{"a", "b"}, wantCursor: -1},
		{name: "context before the call is seen", texts: []string{"a", "b", "@Andy c"}, wantRun: true, wantSeen: []string{"a", "b", "@Andy c"}, wantCursor: 2},
		{name: "after the last call waits", texts: []string{"a", "@Andy b", "c"}, wantRun: true, wantSeen: []string{"a", "@Andy b"}, wantCursor: 1},
		{name: "two calls, one run", texts: []string{"@Andy a", "b", "@Andy c"}, wantRun: true, wantSeen: []string{"@Andy a", "b", "@Andy c"}, wantCursor: 2},
		{name: "MaxContext keeps the newest", texts: []string{"a", "b", "c", "@Andy d"}, maxContext: 2, wantRun: true, wantSeen: []string{"c", "@Andy d"}, wantCursor: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			if tc.maxContext > 0 {
				f.r.cfg.MaxContext = tc.maxContext
			}
			for _, text := range tc.texts {
				f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: text})
			}
			msgs := f.stored(t, family)
			require.Len(t, msgs, len(tc.texts))

			require.NoError(t, f.r.pending(t.Context(), "family"))

			reqs := f.agents.requests()
			if !tc.wantRun {
				assert.Empty(t, reqs)
				assert.Zero(t, f.cursor(t, "family"))
				assert.Empty(t, f.outbox(t, family))
				return
			}
			require.Len(t, reqs, 1)
			assert.Equal(t, "family", reqs[0].Group.Folder)
			assert.Equal(t, domain.ContextGroup, reqs[0].ContextMode)
			assert.Equal(t, len(tc.wantSeen), strings.Count(reqs[0].Prompt, "<message "), reqs[0].Prompt)
			for _, m := range msgs {
				seen := strings.Contains(reqs[0].Prompt, ">"+m.Text+"</message>")
				assert.Equal(t, contains(tc.wantSeen, m.Text), seen, "message %q in the prompt", m.Text)
			}
			assert.Equal(t, msgs[tc.wantCursor].Seq, f.cursor(t, "family"))
			assert.Equal(t, []string{"the answer"}, f.outbox(t, family))
			assert.Contains(t, f.msgr.typed(), family, "typing shown while the agent runs")

			// Run again: what is left has not called the agent.
			require.NoError(t, f.r.pending(t.Context(), "family"))
			assert.Len(t, f.agents.requests(), 1)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A failed run records nothing; giving up on it tells the chat (and, for a
// group, the owner) and moves the cursor past the messages that failed,
// unless no sandbox ever ran them.
func TestGiveUpMovesTheCursor(t *testing.T) {
	agentFailed := fmt.Errorf("agent for %q: %w", "x", runner.ErrTimedOut)
	noSandbox := fmt.Errorf("run: %w: %w", runner.ErrNoSandbox, errors.New("bwrap: not found"))
	tests := []struct {
		name       string
		folder     string
		chat       int64
		err        error
		moves      bool   // the cursor passes the failed messages
		notice     string // in the chat
		ownerAlso  bool   // and a notice to the owner in main
		ownerWords string
	}{
		{name: "group run failed", folder: "family", chat: family, err: agentFailed, moves: true, notice: groupRunNotice(agentFailed), ownerAlso: true, ownerWords: "group family failed"},
		{name: "main run failed", folder: domain.MainFolder, chat: owner, err: agentFailed, moves: true, notice: mainRunNotice(agentFailed)},
		{name: "no sandbox: the messages wait", folder: "family", chat: family, err: noSandbox, notice: groupRunNotice(noSandbox), ownerAlso: true, ownerWords: "no working sandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			f.agents.err = tc.err
			chatType := "supergroup"
			if tc.chat == owner {
				chatType = "private"
			}
			f.say(t, domain.Inbound{ChatID: tc.chat, ChatType: chatType, SenderID: owner, Text: "@Andy first"})
			last := f.say(t, domain.Inbound{ChatID: tc.chat, ChatType: chatType, SenderID: owner, Text: "@Andy second"})
			msgs := f.stored(t, tc.chat)
			require.Len(t, msgs, 2)

			err := f.r.pending(t.Context(), tc.folder)
			require.ErrorIs(t, err, tc.err)
			assert.Zero(t, f.cursor(t, tc.folder), "a failed run moves nothing")
			assert.Empty(t, f.outbox(t, tc.chat), "and answers nothing")

			f.r.giveUp(t.Context(), tc.folder, err)
			if tc.moves {
				assert.Equal(t, msgs[1].Seq, f.cursor(t, tc.folder))
			} else {
				assert.Zero(t, f.cursor(t, tc.folder))
			}
			assert.Equal(t, []string{tc.notice}, f.outbox(t, tc.chat))
			if tc.ownerAlso {
				toOwner := f.outbox(t, owner)
				require.Len(t, toOwner, 1)
				assert.Contains(t, toOwner[0], tc.ownerWords)
			}
			assert.Len(t, f.audited(t, "agent.run", "error"), 1)

			// Only a message after the failed ones calls the agent again.
			f.agents.err = nil
			require.NoError(t, f.r.pending(t.Context(), tc.folder))
			if tc.moves {
				assert.Len(t, f.agents.requests(), 1, "the failed messages are not run again")
				f.say(t, domain.Inbound{ChatID: tc.chat, ChatType: chatType, SenderID: owner, Text: "@Andy third"})
				require.NoError(t, f.r.pending(t.Context(), tc.folder))
				reqs := f.agents.requests()
				require.Len(t, reqs, 2)
				assert.NotContains(t, reqs[1].Prompt, "second", "not retried with the next call")
				assert.Contains(t, reqs[1].Prompt, "third")
			} else {
				reqs := f.agents.requests()
				require.Len(t, reqs, 2, "run again once a sandbox works")
				assert.Contains(t, reqs[1].Prompt, last.Text)
			}
		})
	}
}

// recoverPending wakes exactly the groups with a call after their cursor.
func TestRecoverPendingWakesUnanswered(t *testing.T) {
	f := newFixture(t, "")
	f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "no call"})
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "answer me"})
	f.r.q = newQueue(queueConfig{}) // as after a restart

	require.NoError(t, f.r.recoverPending(t.Context()))
	assert.Equal(t, []string{domain.MainFolder}, f.kicks())
}

// Run is the router at work: a message stored before it started is
// answered (the queue starts with what waits), a task the scheduler hands
// over runs in its group's queue, and both answers are delivered, woken by
// the store.
func TestRunAnswersWaitingMessagesAndScheduledTasks(t *testing.T) {
	f := newFixture(t, "")
	m := &gatedMessenger{notif: make(chan string, 16)}
	f.r.cfg.Messenger = m
	f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"})
	f.r.Schedule(t.Context(), domain.Task{ID: 7, Group: "family", Prompt: "the nightly check", ScheduleType: domain.ScheduleInterval, ScheduleValue: "1h"})
	require.Empty(t, f.agents.requests(), "nothing runs before Run")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.r.Run(ctx) }()
	got := []string{m.next(t), m.next(t)}
	cancel()
	require.NoError(t, <-done)

	assert.Equal(t, []string{"the answer", "the answer"}, got, "the message's answer and the task's")
	reqs := f.agents.requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[0].Prompt, "@Andy hi", "messages first, then queued work")
	assert.Equal(t, int64(7), reqs[1].TaskID)
	assert.Equal(t, "family", reqs[1].Group.Folder)
}
