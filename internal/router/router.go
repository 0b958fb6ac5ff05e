// Package router is the host's switchboard: every inbound chat message goes
// through Handle, which records the chat, recognises the owner, runs admin
// commands, stores messages of registered groups and wakes the group's queue
// when the agent is called. Pending runs a group's agent over everything it
// has not answered yet, and Deliver sends answers from the outbox.
package router

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/policy"
	"github.com/clawpen/clawpen/internal/prompt"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/trigger"
)

// Messenger delivers text to chats (Telegram in production).
type Messenger interface {
	// Send delivers markdown text, split as needed; it reports how many
	// chunks were delivered before an error.
	Send(ctx context.Context, chatID int64, threadID int, markdown string) (int, error)
	Typing(ctx context.Context, chatID int64, threadID int) error
}

// Agents runs one agent invocation. With Request.OnResult set, a nil error
// means OnResult was called and returned nil.
type Agents interface {
	Run(ctx context.Context, req runner.Request) (runner.Answer, error)
}

// Inbound is one message as the chat adapter saw it.
type Inbound struct {
	ChatID            int64
	ChatType          string // private, group, supergroup, channel
	ChatTitle         string
	MessageID         int64
	ThreadID          int
	SenderID          int64
	SenderName        string
	SenderIsBot       bool
	Text              string
	Time              time.Time
	MentionsBot       bool
	ReplyToBot        bool
	MigrateToChatID   int64
	MigrateFromChatID int64
}

// Config wires the router.
type Config struct {
	Store         *store.Store
	Messenger     Messenger
	Agents        Agents
	Kick          func(group string) // wake the group's queue
	OwnerID       int64              // from CLAWPEN_OWNER_ID; 0 = pairing
	AssistantName string
	BotUsername   string
	GroupsDir     string
	TZ            *time.Location
	Logger        *slog.Logger
	// Status adds host details (sandbox, queue) to /status.
	Status func(ctx context.Context) string
	// MaxContext caps how many pending messages one run receives.
	MaxContext int
	// DefaultPolicy applies to groups without a sender policy of their own.
	DefaultPolicy policy.Policy
	// MinInterval is the shortest interval a task may repeat at.
	MinInterval time.Duration
	// WakeScheduler is called after tasks change.
	WakeScheduler func()
}

// Router is safe for concurrent use.
type Router struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	pairCode  string           // one-time, while no owner is known
	attempted map[string]int64 // per group: the last message seq of the run being tried

	deliverWake chan struct{}
}

const ownerKey = "owner_id"

// New creates a router. When no owner is configured or paired yet it makes a
// one-time pairing code; PairingCode returns it for the operator.
func New(ctx context.Context, cfg Config) (*Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TZ == nil {
		cfg.TZ = time.Local
	}
	if cfg.DefaultPolicy.Mode == "" {
		cfg.DefaultPolicy = policy.Default
	}
	if cfg.MaxContext <= 0 {
		cfg.MaxContext = 200
	}
	r := &Router{cfg: cfg, log: cfg.Logger, deliverWake: make(chan struct{}, 1), attempted: map[string]int64{}}
	owner, err := r.Owner(ctx)
	if err != nil {
		return nil, err
	}
	if owner == 0 {
		code, err := newPairCode()
		if err != nil {
			return nil, err
		}
		r.pairCode = code
	}
	return r, nil
}

// PairingCode is the code to send as "/pair CODE", or "" once an owner is known.
func (r *Router) PairingCode() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pairCode
}

// Owner is the owner's Telegram user id, 0 when not yet paired.
func (r *Router) Owner(ctx context.Context) (int64, error) {
	if r.cfg.OwnerID != 0 {
		return r.cfg.OwnerID, nil
	}
	v, ok, err := r.cfg.Store.State(ctx, ownerKey)
	if err != nil || !ok {
		return 0, err
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored owner id %q: %w", v, err)
	}
	return id, nil
}

// Handle processes one inbound message. An error means nothing was
// recorded and the same message must be offered again.
func (r *Router) Handle(ctx context.Context, in Inbound) error {
	if in.MigrateToChatID != 0 {
		return r.migrate(ctx, in.ChatID, in.MigrateToChatID)
	}
	if in.MigrateFromChatID != 0 {
		if err := r.migrate(ctx, in.MigrateFromChatID, in.ChatID); err != nil {
			return err
		}
	}
	if err := r.cfg.Store.UpsertChat(ctx, domain.Chat{ID: in.ChatID, Title: chatTitle(in), Type: in.ChatType, LastSeen: in.Time}); err != nil {
		return fmt.Errorf("record chat %d: %w", in.ChatID, err)
	}
	if in.SenderIsBot {
		return nil
	}
	if in.ChatType == "private" {
		return r.handlePrivate(ctx, in)
	}
	g, ok, err := r.cfg.Store.GroupByChat(ctx, in.ChatID)
	if err != nil {
		return fmt.Errorf("look up group of chat %d: %w", in.ChatID, err)
	}
	if !ok {
		// Unregistered chats: metadata only, contents are not kept.
		return nil
	}
	if g.IsMain() {
		// The main group is the owner's private chat; a group chat cannot be main.
		return nil
	}
	if isCommand(in.Text) {
		_ = r.audit(ctx, g.Folder, "command", "deny", fmt.Sprintf("slash command from user %d outside the main chat", in.SenderID))
	}
	verdict, err := r.senderVerdict(ctx, g, in.SenderID)
	if err != nil {
		return err
	}
	if !verdict.Store {
		return nil
	}
	word := g.Trigger
	if word == "" {
		word = trigger.Word(r.cfg.AssistantName)
	}
	fires := verdict.MayTrigger && trigger.Fires(trigger.Signals{Text: in.Text, MentionsBot: in.MentionsBot, ReplyToBot: in.ReplyToBot}, word, r.cfg.BotUsername)
	return r.store(ctx, g, in, fires)
}

// senderVerdict applies the group's sender policy. A malformed policy fails
// closed (only the owner calls the agent) and is reported.
func (r *Router) senderVerdict(ctx context.Context, g domain.Group, sender int64) (policy.Verdict, error) {
	owner, err := r.Owner(ctx)
	if err != nil {
		return policy.Verdict{}, err
	}
	p, perr := policy.Parse(g.Policy, r.cfg.DefaultPolicy)
	if perr != nil {
		r.log.Error("malformed sender policy; only the owner may call the agent", "group", g.Folder, "err", perr)
		_ = r.audit(ctx, g.Folder, "policy", "error", perr.Error())
	}
	return p.Decide(sender, owner), nil
}

func (r *Router) handlePrivate(ctx context.Context, in Inbound) error {
	owner, err := r.Owner(ctx)
	if err != nil {
		return err
	}
	if owner == 0 {
		return r.tryPair(ctx, in)
	}
	if in.SenderID != owner {
		r.log.Info("ignored private chat from a stranger", "chat", in.ChatID, "sender", in.SenderID)
		return r.audit(ctx, "", "telegram.private", "deny", fmt.Sprintf("private message from user %d, who is not the owner", in.SenderID))
	}
	g, err := r.ensureMain(ctx, in.ChatID)
	if err != nil {
		return err
	}
	if isCommand(in.Text) {
		handled, err := r.command(ctx, g, in)
		if handled || err != nil {
			return err
		}
	}
	return r.store(ctx, g, in, true)
}

func (r *Router) tryPair(ctx context.Context, in Inbound) error {
	fields := strings.Fields(in.Text)
	r.mu.Lock()
	code := r.pairCode
	r.mu.Unlock()
	if len(fields) != 2 || fields[0] != "/pair" || code == "" || !strings.EqualFold(fields[1], code) {
		r.log.Info("ignored private chat before pairing", "chat", in.ChatID, "sender", in.SenderID)
		return r.audit(ctx, "", "telegram.private", "deny", fmt.Sprintf("private message from user %d before pairing", in.SenderID))
	}
	if err := r.cfg.Store.SetState(ctx, ownerKey, strconv.FormatInt(in.SenderID, 10)); err != nil {
		return fmt.Errorf("persist owner: %w", err)
	}
	r.mu.Lock()
	r.pairCode = ""
	r.mu.Unlock()
	if _, err := r.ensureMain(ctx, in.ChatID); err != nil {
		return err
	}
	_ = r.audit(ctx, domain.MainFolder, "pair", "allow", fmt.Sprintf("user %d paired as owner", in.SenderID))
	r.log.Info("owner paired", "user", in.SenderID)
	return r.reply(ctx, in.ChatID, in.ThreadID, fmt.Sprintf("Paired. You are the owner of %s; this chat is the main group. Send /help for the commands.", r.cfg.AssistantName))
}

// ensureMain makes the owner's private chat the main group.
func (r *Router) ensureMain(ctx context.Context, chatID int64) (domain.Group, error) {
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, domain.MainFolder)
	if err != nil {
		return domain.Group{}, fmt.Errorf("look up main group: %w", err)
	}
	if ok && g.ChatID == chatID {
		return g, nil
	}
	g = domain.Group{ChatID: chatID, Name: "main", Folder: domain.MainFolder, Added: time.Now()}
	if err := r.cfg.Store.PutGroup(ctx, g); err != nil {
		return domain.Group{}, fmt.Errorf("register main group: %w", err)
	}
	return g, nil
}

// store keeps the message and wakes the group's queue if it calls the agent.
func (r *Router) store(ctx context.Context, g domain.Group, in Inbound, fires bool) error {
	_, inserted, err := r.cfg.Store.AddMessage(ctx, domain.Message{
		ChatID: in.ChatID, MessageID: in.MessageID, ThreadID: in.ThreadID, SenderID: in.SenderID,
		SenderName: in.SenderName, Text: in.Text, Time: in.Time, Triggered: fires,
	})
	if err != nil {
		return fmt.Errorf("store message of %q: %w", g.Folder, err)
	}
	if inserted && fires && r.cfg.Kick != nil {
		r.cfg.Kick(g.Folder)
	}
	return nil
}

func (r *Router) migrate(ctx context.Context, from, to int64) error {
	if err := r.cfg.Store.RekeyChat(ctx, from, to); err != nil {
		return fmt.Errorf("migrate chat %d to %d: %w", from, to, err)
	}
	r.log.Info("chat migrated to supergroup", "from", from, "to", to)
	return nil
}

// Pending runs the agent of a group over every message since its cursor, if
// one of them called it. Only a successful run advances the cursor, in the
// same transaction that queues the answer.
func (r *Router) Pending(ctx context.Context, folder string) error {
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, folder)
	if err != nil {
		return fmt.Errorf("look up group %q: %w", folder, err)
	}
	if !ok {
		return nil
	}
	cursor, err := r.cfg.Store.Cursor(ctx, folder)
	if err != nil {
		return fmt.Errorf("cursor of %q: %w", folder, err)
	}
	msgs, err := r.cfg.Store.MessagesAfter(ctx, g.ChatID, cursor, 100000)
	if err != nil {
		return fmt.Errorf("pending messages of %q: %w", folder, err)
	}
	last := -1
	for i, m := range msgs {
		if m.Triggered {
			last = i
		}
	}
	if last < 0 {
		return nil // nothing calls the agent; the messages wait as context
	}
	msgs = msgs[:last+1]
	window := msgs
	if len(window) > r.cfg.MaxContext {
		window = window[len(window)-r.cfg.MaxContext:]
	}
	thread := msgs[last].ThreadID
	r.mu.Lock()
	r.attempted[folder] = msgs[last].Seq
	r.mu.Unlock()

	stopTyping := r.typing(ctx, g.ChatID, thread)
	defer stopTyping()
	// The answer is recorded (cursor and outbox in one transaction) and
	// delivery woken as soon as the agent's result arrives, not after the
	// sandbox's teardown.
	recorded := false
	_, err = r.cfg.Agents.Run(ctx, runner.Request{Group: g, Prompt: prompt.Messages(window, r.cfg.TZ), ContextMode: domain.ContextGroup,
		OnResult: func(ctx context.Context, text string) error {
			stopTyping()
			if _, err := r.cfg.Store.CompleteRun(ctx, folder, msgs[last].Seq, outgoing(g.ChatID, thread, text)); err != nil {
				return fmt.Errorf("complete run of %q: %w", folder, err)
			}
			recorded = true
			r.WakeDelivery()
			return nil
		}})
	if err == nil && !recorded {
		return fmt.Errorf("agent run of %q succeeded without handing over its answer", folder)
	}
	return err
}

// GiveUp tells the chat that its messages could not be answered.
func (r *Router) GiveUp(ctx context.Context, folder string, runErr error) {
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, folder)
	if err != nil || !ok {
		return
	}
	_ = r.audit(ctx, folder, "agent.run", "error", runErr.Error())
	text := "Sorry, I could not answer: " + runErr.Error()
	if !g.IsMain() {
		// Host details stay with the owner; members get the fact only.
		text = "Sorry, I could not answer this time. The owner has been told."
		if errors.Is(runErr, runner.ErrNoSandbox) {
			text = "Sorry, I cannot run right now: the host has no working sandbox, and I never run without one. The owner has been told."
		}
		if main, ok, _ := r.cfg.Store.GroupByFolder(ctx, domain.MainFolder); ok {
			_ = r.reply(ctx, main.ChatID, 0, fmt.Sprintf("The agent of %q failed after retries: %v", folder, runErr))
		}
	}
	// The failure notice answers the messages that failed: the cursor moves
	// past them with it, so one message that always fails cannot break the
	// group. Without a sandbox nothing was tried; they wait for a restart.
	r.mu.Lock()
	seq := r.attempted[folder]
	delete(r.attempted, folder)
	r.mu.Unlock()
	if seq > 0 && !errors.Is(runErr, runner.ErrNoSandbox) {
		if _, err := r.cfg.Store.CompleteRun(ctx, folder, seq, outgoing(g.ChatID, 0, text)); err != nil {
			r.log.Error("tell chat about failure", "group", folder, "err", err)
		}
		r.WakeDelivery()
		return
	}
	if err := r.reply(ctx, g.ChatID, 0, text); err != nil {
		r.log.Error("tell chat about failure", "group", folder, "err", err)
	}
}

// reply puts a host-written message in the outbox and wakes delivery; it
// goes out like every answer, paced and retried.
func (r *Router) reply(ctx context.Context, chatID int64, thread int, text string) error {
	if _, err := r.cfg.Store.Enqueue(ctx, outgoing(chatID, thread, text)); err != nil {
		return fmt.Errorf("queue message to %d: %w", chatID, err)
	}
	r.WakeDelivery()
	return nil
}

// outgoing splits text into outbox rows, one per Telegram message, so a crash
// mid-answer resends only what was not delivered.
func outgoing(chatID int64, thread int, text string) []domain.Outgoing {
	var out []domain.Outgoing
	for _, c := range markup.Split(strings.TrimSpace(text), markup.MaxMessageLen) {
		out = append(out, domain.Outgoing{ChatID: chatID, ThreadID: thread, Text: c, Created: time.Now()})
	}
	return out
}

func (r *Router) typing(ctx context.Context, chatID int64, thread int) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(4 * time.Second)
		defer t.Stop()
		for {
			if err := r.cfg.Messenger.Typing(ctx, chatID, thread); err != nil && ctx.Err() == nil {
				r.log.Debug("typing indicator", "chat", chatID, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// RecoverPending wakes, after a restart, the groups holding triggered
// messages after their cursor: only those have work (Pending does nothing for
// the others), and waking all of them would start one queue worker per
// registered group (10,000 groups: ~20 MB of goroutines and a slow start).
func (r *Router) RecoverPending(ctx context.Context) error {
	folders, err := r.cfg.Store.FoldersWithUnanswered(ctx)
	if err != nil {
		return fmt.Errorf("recover pending groups: %w", err)
	}
	for _, f := range folders {
		if r.cfg.Kick != nil {
			r.cfg.Kick(f)
		}
	}
	r.WakeDelivery()
	return nil
}

func (r *Router) audit(ctx context.Context, group, op, decision, reason string) error {
	err := r.cfg.Store.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: group, Operation: op, Decision: decision, Reason: reason})
	if err != nil {
		r.log.Error("write audit log", "err", err)
	}
	return err
}

func chatTitle(in Inbound) string {
	if in.ChatTitle != "" {
		return in.ChatTitle
	}
	return in.SenderName
}

func isCommand(text string) bool { return strings.HasPrefix(strings.TrimSpace(text), "/") }

func newPairCode() (string, error) {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pairing code: %w", err)
	}
	return base32.StdEncoding.EncodeToString(b), nil
}
