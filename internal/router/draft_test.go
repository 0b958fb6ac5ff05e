package router

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/runner"
)

// clock is a hand-driven clock for the draft's pacing: the draft asks for
// a wait on waits, and goes on when the test fires it.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan time.Time
}

func newClock() *clock {
	return &clock{now: time.Unix(1000, 0), waits: make(chan time.Duration, 1), fire: make(chan time.Time)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// sends records the drafts sent, each on a channel as it starts; a send
// returns when released (or with its context).
type sends struct {
	started chan string
	release chan error
}

func (s *sends) send(ctx context.Context, text string) error {
	s.started <- text
	select {
	case err := <-s.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func startTestDraft(t *testing.T, c *clock) (*liveDraft, *sends) {
	s := &sends{started: make(chan string, 10), release: make(chan error, 10)}
	d := newLiveDraft(s.send, slog.New(slog.DiscardHandler))
	d.now, d.after = c.Now, c.After
	d.start(t.Context())
	t.Cleanup(d.stop)
	return d, s
}

// At most one draft every draftEvery, the first at once, only of changed
// text, and what comes while one is in flight replaced by what came last.
func TestLiveDraftPacing(t *testing.T) {
	c := newClock()
	d, s := startTestDraft(t, c)

	d.update("He")
	assert.Equal(t, "He", <-s.started, "the first draft goes at once")
	d.update("Hel") // while "He" is in flight: replaced by the next
	d.update("Hello")
	c.advance(100 * time.Millisecond)
	s.release <- nil
	assert.Equal(t, draftEvery-100*time.Millisecond, <-c.waits, "the next waits for its turn")
	c.advance(draftEvery)
	c.fire <- c.Now()
	assert.Equal(t, "Hello", <-s.started, "only the latest text")
	s.release <- errors.New("refused") // a failed draft changes nothing

	d.update("Hello") // unchanged: nothing sent
	assert.Equal(t, draftEvery, <-c.waits)
	c.fire <- c.Now()
	d.update("Hello, world")
	// Read after the fire, or on a wake-up of its own after another wait.
	select {
	case w := <-c.waits:
		assert.Equal(t, draftEvery, w)
		c.advance(draftEvery)
		c.fire <- c.Now()
		assert.Equal(t, "Hello, world", <-s.started, "not Hello again")
	case got := <-s.started:
		assert.Equal(t, "Hello, world", got, "not Hello again")
	}
	s.release <- nil
}

// stop cancels a draft in flight, and no draft follows it.
func TestLiveDraftStop(t *testing.T) {
	c := newClock()
	d, s := startTestDraft(t, c)
	d.update("partial")
	require.Equal(t, "partial", <-s.started)
	d.stop() // returns although the send was never released
	d.update("more")
	d.stop()
	assert.Empty(t, s.started)
}

func TestDraftPart(t *testing.T) {
	assert.Equal(t, "short", draftPart("short"))
	long := strings.Repeat("word ", 1000) + "\n\n" + strings.Repeat("tail ", 300)
	part := draftPart(long)
	assert.LessOrEqual(t, markup.Len(part), markup.MaxMessageLen)
	assert.Less(t, len(part), len(long))
	assert.True(t, strings.HasSuffix(strings.TrimSpace(long), strings.TrimSpace(part)), "the message being written")
}

// drafter records drafts; it fails each with err, or blocks until its
// context ends when block is set.
type drafter struct {
	mu     sync.Mutex
	drafts []string
	chats  []int64
	err    error
	block  bool
}

func (d *drafter) Draft(ctx context.Context, chatID int64, _ int, _ int64, text string) error {
	d.mu.Lock()
	d.drafts = append(d.drafts, text)
	d.chats = append(d.chats, chatID)
	block, err := d.block, d.err
	d.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// progressAgents answers after writing progress lines.
type progressAgents struct {
	agents
	progress []string
}

func (a *progressAgents) Start(ctx context.Context, req runner.Request) *runner.Invocation {
	for _, p := range a.progress {
		if req.Progress != nil {
			req.Progress(p)
		}
	}
	return a.agents.Start(ctx, req)
}

// Drafts are shown in the main chat only, for its own run; a failing or
// hanging draft neither stops nor doubles the answer.
func TestDraftsMainOnlyAndNeverInTheWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *drafter
	}{
		{"drafts shown", &drafter{}},
		{"drafts refused", &drafter{err: errors.New("Bad Request")}},
		{"drafts hang", &drafter{block: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			ag := &progressAgents{agents: agents{answer: "the answer"}, progress: []string{"the", "the ans"}}
			f.r.cfg.Agents, f.r.cfg.Drafts = ag, tc.d
			f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "hi"})
			f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"})
			require.NoError(t, f.r.pending(t.Context(), domain.MainFolder))
			require.NoError(t, f.r.pending(t.Context(), "family"))

			assert.Equal(t, []string{"the answer"}, f.outbox(t, owner), "answered once")
			assert.Equal(t, []string{"the answer"}, f.outbox(t, family))
			reqs := ag.requests()
			require.Len(t, reqs, 2)
			assert.NotNil(t, reqs[0].Progress, "main's run shows drafts")
			assert.Nil(t, reqs[1].Progress, "a group's run does not")
			tc.d.mu.Lock()
			defer tc.d.mu.Unlock()
			for _, c := range tc.d.chats {
				assert.Equal(t, owner, c)
			}
		})
	}
}

func TestHelpHasAnExampleOfEveryCommand(t *testing.T) {
	f := newFixture(t, "")
	help := f.r.help()
	for _, c := range Commands {
		ex, ok := commandExamples[c.Name]
		require.True(t, ok, "no example for /%s", c.Name)
		assert.True(t, strings.HasPrefix(ex, "/"+c.Name), ex)
		assert.Contains(t, help, "/"+c.Name+" ")
		assert.Contains(t, help, "e.g. "+ex)
	}
	assert.Len(t, commandExamples, len(Commands), "no example of a command that does not exist")
}

// A member's admin command in a group is audited and dropped: not kept,
// not calling the agent, not answered; other slash words are messages.
func TestAdminCommandInGroupDoesNothing(t *testing.T) {
	for _, tc := range []struct {
		text    string
		dropped bool
	}{
		{"/unregister family @Andy", true},
		{"/status@andy_test_bot @Andy", true},
		{"/help @Andy", true},
		{"/pair ABC @Andy", true},
		{`/schedule "unclosed @Andy`, true},
		{"/shrug @Andy", false},
		{"/status@other_bot @Andy", false},
	} {
		t.Run(tc.text, func(t *testing.T) {
			f := newFixture(t, "")
			f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: tc.text})
			assert.Len(t, f.audited(t, "command", "deny"), 1)
			assert.Empty(t, f.outbox(t, family))
			if tc.dropped {
				assert.Empty(t, f.stored(t, family))
				assert.Empty(t, f.kicks())
			} else {
				assert.Len(t, f.stored(t, family), 1)
				assert.Equal(t, []string{"family"}, f.kicks())
			}
			_, ok, err := f.st.GroupByFolder(t.Context(), "family")
			require.NoError(t, err)
			assert.True(t, ok, "nothing unregistered")
		})
	}
}

// The menu is set at start for the owner's chat, and on pairing.
func TestMenuForOwnerChat(t *testing.T) {
	f := newFixture(t, "")
	var got []int64
	ctx, cancel := context.WithCancel(t.Context())
	f.r.cfg.Menu = func(_ context.Context, chat int64) error {
		got = append(got, chat)
		cancel() // Run ends at once after it
		return nil
	}
	_ = f.r.Run(ctx)
	assert.Equal(t, []int64{owner}, got)
}

// Drafts refused draftFailures times in a row end the run's drafts.
func TestLiveDraftGivesUpWhenRefused(t *testing.T) {
	c := newClock()
	d, s := startTestDraft(t, c)
	for i := range draftFailures {
		d.update(strings.Repeat("x", i+1))
		if i > 0 {
			<-c.waits
			c.advance(draftEvery)
			c.fire <- c.Now()
		}
		<-s.started
		s.release <- errors.New("Bad Request: drafts are not for this bot")
	}
	<-d.done // the sender stopped by itself
	d.update("more")
	assert.Empty(t, s.started)
}
