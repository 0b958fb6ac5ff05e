// Package router is the host's switchboard. Every inbound chat message goes
// through Handle, which records the chat, recognises the owner, runs admin
// commands, stores messages of registered groups and wakes the group's queue
// (queue.go) when the agent is called. The queue runs a group's agent over
// everything it has not answered yet, and the scheduled tasks the scheduler
// hands to Schedule; delivery (deliver.go) sends answers from the outbox.
// Run runs the queue and delivery.
package router

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/store"
)

// Messenger delivers text to chats (Telegram in production).
type Messenger interface {
	// Send delivers one message of markdown (an outbox row, split when the
	// answer was stored) in one attempt. Its error may say it was throttled
	// (RetryIn), refused for good (Permanent) or the chat migrated (Migration).
	Send(ctx context.Context, chatID int64, threadID int, markdown string) error
	// SendFile delivers one file of kind domain.OutPhoto or OutDocument
	// with a plain caption, in one attempt, its errors as Send's.
	SendFile(ctx context.Context, chatID int64, threadID int, kind, name string, data []byte, caption string) error
	Typing(ctx context.Context, chatID int64, threadID int) error
}

// Agents runs agent invocations (the runner).
type Agents interface {
	// Start begins one invocation; its answer comes on the invocation's
	// Answer before the sandbox has ended, and Wait says how it ended.
	Start(ctx context.Context, req runner.Request) *runner.Invocation
	// Forget removes a group's conversation (/new), also from a run of the
	// group in progress once it ends; it reports whether there was one.
	Forget(folder string) (bool, error)
	// Warm lists the groups whose sandbox waits ready, and how many may.
	Warm() (folders []string, max int)
}

// Config is what the router works with.
type Config struct {
	Store     *store.Store
	Messenger Messenger
	Agents    Agents
	// Ops carries out the owner's commands on tasks and groups.
	Ops           *ops.Service
	OwnerID       int64 // from CLAWPEN_OWNER_ID; 0 = pairing
	AssistantName string
	BotUsername   string
	TZ            *time.Location
	Logger        *slog.Logger
	// MaxConcurrent bounds the agent runs at once, over all groups.
	MaxConcurrent int
	// RetryBackoff lists the waits between retries of a group's failed run;
	// after the last one the chat is told.
	RetryBackoff []time.Duration
	// Host is what the host knows of itself for /status (its sandbox);
	// what runs and waits the router adds.
	Host HostStatus
	// Mounts is the allowlist /status describes; nil: not described.
	Mounts *mounts.Policy
	// MaxContext caps how many pending messages one run receives.
	MaxContext int
	// DefaultPolicy applies to groups without a sender policy of their own.
	DefaultPolicy domain.SenderPolicy
	// SenderRate is the calls per member and hour of groups whose sender
	// policy sets no rate (CLAWPEN_SENDER_RATE); 0: no limit.
	SenderRate int
	// Profile resolves a sandbox profile by name (/usage shows budgets);
	// nil: none shown.
	Profile func(name string) (domain.Profile, error)
	// Now is the clock of usage days (default time.Now); days are in TZ.
	Now func() time.Time
	// Observer hears what became of each message and send, for the host's
	// metrics; nil: nobody.
	Observer Observer
	// Files fetches files users send into GroupsDir/<folder>/inbox/, up to
	// MaxFileBytes each (attachments.go); nil: files are only noted.
	Files        Fetcher
	GroupsDir    string
	MaxFileBytes int64
	// SandboxUser is whose rights the host writes a group's inbox with
	// (zero: the host's own, as on a host that is not root).
	SandboxUser beneath.User
	// Transcriber makes voice notes, audio and video notes text once
	// fetched (transcribe.go); nil: they stay files. A group other than
	// main may have TranscribeDailySeconds of audio transcribed a day (0:
	// no limit).
	Transcriber            Transcriber
	TranscribeDailySeconds int64
	// Drafts shows the main group's answers while they are written; nil:
	// none shown.
	Drafts Drafter
	// Menu sets the bot's command menu: the admin commands in the owner's
	// chat only (0: in none). Called at start and when the owner pairs;
	// nil: not set.
	Menu func(ctx context.Context, ownerChat int64) error
	// Guard finds the host's secrets in what is sent (leakguard.go); nil:
	// nothing is looked for.
	Guard *leakguard.Guard
}

// Observer hears what the router did. Kinds of inbound messages: "main",
// "group" (stored as context), "triggered" (called the agent), "command",
// "ignored" (nothing kept). Send results: "sent", "throttled" (429),
// "failed" (retried), "dropped". RecordFailed: the outbox failed to record
// a row delivery is done with (the record is retried, not the send).
type Observer interface {
	Received(kind string)
	Sent(result string)
	RecordFailed()
}

type noObserver struct{}

func (noObserver) Received(string) {}
func (noObserver) Sent(string)     {}
func (noObserver) RecordFailed()   {}

// Router is safe for concurrent use.
type Router struct {
	cfg Config
	log *slog.Logger

	q *queue // one run per group at a time

	mu        sync.Mutex
	pairCode  string           // one-time, while no owner is known
	attempted map[string]int64 // per group: the last message seq of the run being tried

	deliverWake chan struct{}
	delivery    *delivery   // the outbox's senders
	fetches     *fetchQueue // files users sent, to fetch into inboxes
	limits      limitCount  // runs that reached a sandbox limit, for /status
}

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
		cfg.DefaultPolicy = domain.DefaultSenderPolicy
	}
	if cfg.MaxContext <= 0 {
		cfg.MaxContext = 200
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	r := &Router{cfg: cfg, log: cfg.Logger, deliverWake: make(chan struct{}, 1), attempted: map[string]int64{},
		fetches: newFetchQueue()}
	r.delivery = newDelivery(r)
	r.q = newQueue(queueConfig{MaxConcurrent: cfg.MaxConcurrent, Pending: r.pending, Backoff: cfg.RetryBackoff,
		GiveUp: r.giveUp, Permanent: permanent, Logger: cfg.Logger})
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

// Run runs the group queues (starting with the groups a restart left
// unanswered), the fetching of files users sent (starting with those a
// restart left unfetched) and delivery until ctx is done, and returns once
// every run, fetch and send has ended.
func (r *Router) Run(ctx context.Context) error {
	owner, err := r.Owner(ctx)
	if err != nil {
		return err
	}
	r.showMenu(ctx, owner)
	if err := r.recoverFetches(ctx); err != nil {
		return err
	}
	if err := r.recoverPending(ctx); err != nil {
		return err
	}
	fetching := make(chan struct{})
	go func() {
		defer close(fetching)
		r.fetchFiles(ctx)
	}()
	r.q.start(ctx)
	r.deliver(ctx)
	r.q.wait()
	<-fetching
	return nil
}

// Schedule queues a due task (the scheduler's Dispatch): it runs in its
// group's queue, after what is queued there.
func (r *Router) Schedule(_ context.Context, t domain.Task) {
	r.q.add(t.Group, func(ctx context.Context) error { return r.runTask(ctx, t) })
}

// permanent reports run errors that retrying cannot cure: the chat is told
// at once.
func permanent(err error) bool {
	return errors.Is(err, runner.ErrNoSandbox) || errors.Is(err, runner.ErrDiskQuota) || errors.Is(err, runner.ErrProfile) ||
		errors.Is(err, runner.ErrBudget)
}

// PairingCode is the code to send as "/pair CODE", or "" once an owner is known.
func (r *Router) PairingCode() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pairCode
}

// Owner is the owner's Telegram user id, 0 when not yet paired.
func (r *Router) Owner(ctx context.Context) (int64, error) {
	return r.cfg.Store.Owner(ctx, r.cfg.OwnerID)
}

// Handle processes one inbound message. An error means nothing was
// recorded and the same message must be offered again.
func (r *Router) Handle(ctx context.Context, in domain.Inbound) error {
	kind := "ignored" // what stored or ran it says otherwise
	err := r.handle(ctx, in, &kind)
	if err == nil {
		r.cfg.Observer.Received(kind)
	}
	return err
}

// Unrecorded is how many outbox rows were sent (or given up) that the
// store has refused to record so far; they are not sent again.
func (r *Router) Unrecorded() int {
	n, _ := r.delivery.unrecorded()
	return n
}

// QueueWaiting is the number of agent runs waiting for their turn.
func (r *Router) QueueWaiting() int {
	n := 0
	for _, w := range r.q.stats().Waiting {
		n += w
	}
	return n
}

func (r *Router) handle(ctx context.Context, in domain.Inbound, kind *string) error {
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
		return r.handlePrivate(ctx, in, kind)
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
	if in.Text == "" && in.File == nil {
		// A sticker, a service message: nothing to keep as context, and
		// no empty prompt for the agent.
		return nil
	}
	if isCommand(in.Text) {
		_ = r.audit(ctx, g.Folder, "command", "deny", fmt.Sprintf("slash command from user %d outside the main chat", in.SenderID))
		if r.isAdminCommand(in.Text) {
			return nil
		}
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
		word = triggerWord(r.cfg.AssistantName)
	}
	fires := verdict.MayTrigger && triggered(signals{Text: in.Text, MentionsBot: in.MentionsBot, ReplyToBot: in.ReplyToBot}, word, r.cfg.BotUsername)
	if fires {
		over, err := r.overRate(ctx, g, in)
		if err != nil {
			return err
		}
		fires = !over
	}
	return r.store(ctx, g, in, fires, kind)
}

// senderVerdict applies the group's sender policy. A malformed policy fails
// closed (only the owner calls the agent) and is reported.
func (r *Router) senderVerdict(ctx context.Context, g domain.Group, sender int64) (domain.SenderVerdict, error) {
	owner, err := r.Owner(ctx)
	if err != nil {
		return domain.SenderVerdict{}, err
	}
	p, perr := domain.ParseSenderPolicy(g.Policy, r.cfg.DefaultPolicy)
	if perr != nil {
		r.log.Error("malformed sender policy; only the owner may call the agent", "group", g.Folder, "err", perr)
		_ = r.audit(ctx, g.Folder, "policy", "error", perr.Error())
	}
	return p.Decide(sender, owner), nil
}

func (r *Router) handlePrivate(ctx context.Context, in domain.Inbound, kind *string) error {
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
	if in.Text == "" && in.File == nil {
		// The agent would get an empty prompt: say what did not arrive.
		if in.Media == "" {
			return nil
		}
		return r.reply(ctx, in.ChatID, in.ThreadID, fmt.Sprintf(
			"I cannot take in this %s. Text, photos, files, voice notes, audio and videos reach me; "+
				"please write it in words or send it as one of those.", in.Media))
	}
	if isCommand(in.Text) {
		first, err := r.cfg.Store.ClaimCommand(ctx, in.ChatID, in.MessageID)
		if err != nil {
			return err
		}
		if !first {
			r.log.Info("command already handled before a restart; not running it again", "chat", in.ChatID, "message", in.MessageID)
			return nil
		}
		handled, err := r.command(ctx, g, in)
		if handled {
			*kind = "command"
		}
		if handled || err != nil {
			return err
		}
	}
	return r.store(ctx, g, in, true, kind)
}

func (r *Router) tryPair(ctx context.Context, in domain.Inbound) error {
	fields := strings.Fields(in.Text)
	r.mu.Lock()
	code := r.pairCode
	r.mu.Unlock()
	if len(fields) != 2 || fields[0] != "/pair" || code == "" || !strings.EqualFold(fields[1], code) {
		r.log.Info("ignored private chat before pairing", "chat", in.ChatID, "sender", in.SenderID)
		return r.audit(ctx, "", "telegram.private", "deny", fmt.Sprintf("private message from user %d before pairing", in.SenderID))
	}
	if err := r.cfg.Store.SetOwner(ctx, in.SenderID); err != nil {
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
	r.showMenu(ctx, in.SenderID)
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

// store keeps the message and wakes the group's queue if it calls the
// agent; kind says which it was (a message offered again keeps "ignored").
func (r *Router) store(ctx context.Context, g domain.Group, in domain.Inbound, fires bool, kind *string) error {
	m := domain.Message{
		ChatID: in.ChatID, MessageID: in.MessageID, ThreadID: in.ThreadID, SenderID: in.SenderID,
		SenderName: in.SenderName, Text: in.Text, Time: in.Time, Triggered: fires,
	}
	if in.File != nil {
		m.Attachment, m.FileToFetch = r.planAttachment(in)
	}
	seq, inserted, err := r.cfg.Store.AddMessage(ctx, m)
	if err != nil {
		return fmt.Errorf("store message of %q: %w", g.Folder, err)
	}
	if inserted && m.FileToFetch != "" {
		m.Seq = seq
		r.fetches.add(fetch{folder: g.Folder, m: m})
	}
	if inserted {
		switch {
		case g.IsMain():
			*kind = "main"
		case fires:
			*kind = "triggered"
		default:
			*kind = "group"
		}
	}
	if inserted && fires {
		r.q.kick(g.Folder)
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

// pending runs the agent of a group over every message since its cursor, if
// one of them called it. Only a successful run advances the cursor, in the
// same transaction that queues the answer.
func (r *Router) pending(ctx context.Context, folder string) error {
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
	for _, m := range window {
		if m.FileToFetch != "" {
			return nil // the run waits for the file: its fetch wakes the group
		}
	}
	thread := msgs[last].ThreadID
	r.mu.Lock()
	r.attempted[folder] = msgs[last].Seq
	r.mu.Unlock()

	stopTyping := r.typing(ctx, g.ChatID, thread)
	defer stopTyping()
	req := runner.Request{Group: g, Prompt: messagesPrompt(window, r.cfg.TZ), ContextMode: domain.ContextGroup}
	draft := r.startDraft(ctx, g, thread, msgs[last].Seq)
	if draft != nil {
		defer draft.stop()
		req.Progress = draft.update
	}
	// The answer is recorded (cursor and outbox in one transaction, which
	// wakes delivery) as soon as the agent's result arrives, not after the
	// sandbox's teardown.
	run := r.cfg.Agents.Start(ctx, req)
	text, answered := <-run.Answer()
	var recordErr error
	if answered {
		stopTyping()
		if draft != nil {
			draft.stop()
		}
		text = r.redact(ctx, folder, fmt.Sprintf("the answer to chat %d", g.ChatID), text)
		if _, err := r.cfg.Store.CompleteRun(ctx, folder, msgs[last].Seq, outgoing(g.ChatID, thread, text)); err != nil {
			recordErr = fmt.Errorf("complete run of %q: %w", folder, err)
		}
	}
	_, err = run.Wait()
	r.limits.note(folder, err)
	switch {
	case recordErr != nil:
		return recordErr
	case answered:
		return nil // the answer stands, whatever the sandbox did after it
	case err == nil:
		return fmt.Errorf("agent run of %q succeeded without handing over its answer", folder)
	}
	return err
}

// giveUp tells the chat that its messages could not be answered, and the
// owner which group failed and why, in the host's words (see failure).
func (r *Router) giveUp(ctx context.Context, folder string, runErr error) {
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, folder)
	if err != nil || !ok {
		return
	}
	if errors.Is(runErr, runner.ErrBudget) {
		// Not a failure: the refusal is audited where it was made.
		r.mu.Lock()
		seq := r.attempted[folder]
		delete(r.attempted, folder)
		r.mu.Unlock()
		r.overBudget(ctx, g, seq, runErr)
		return
	}
	_ = r.audit(ctx, folder, "agent.run", "error", "failed after retries: "+failure(runErr))
	text := mainRunNotice(runErr)
	if !g.IsMain() {
		text = groupRunNotice(runErr)
		if main, ok, _ := r.cfg.Store.GroupByFolder(ctx, domain.MainFolder); ok {
			_ = r.reply(ctx, main.ChatID, 0, ownerRunNotice(folder, runErr))
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
		return
	}
	if err := r.reply(ctx, g.ChatID, 0, text); err != nil {
		r.log.Error("tell chat about failure", "group", folder, "err", err)
	}
}

// reply puts a host-written message in the outbox; it goes out like every
// answer, paced and retried.
func (r *Router) reply(ctx context.Context, chatID int64, thread int, text string) error {
	if _, err := r.cfg.Store.Enqueue(ctx, outgoing(chatID, thread, text)); err != nil {
		return fmt.Errorf("queue message to %d: %w", chatID, err)
	}
	return nil
}

// outgoing splits text into outbox rows, one per Telegram message, so a crash
// mid-answer resends only what was not delivered.
func outgoing(chatID int64, thread int, text string) []domain.Outgoing {
	var out []domain.Outgoing
	for _, c := range markup.Messages(strings.TrimSpace(text), markup.MaxMessageLen) {
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

// recoverPending wakes, after a restart, the groups holding triggered
// messages after their cursor: only those have work (pending does nothing for
// the others), and waking all of them would start one queue worker per
// registered group (10,000 groups: ~20 MB of goroutines and a slow start).
func (r *Router) recoverPending(ctx context.Context) error {
	folders, err := r.cfg.Store.FoldersWithUnanswered(ctx)
	if err != nil {
		return fmt.Errorf("recover pending groups: %w", err)
	}
	for _, f := range folders {
		r.q.kick(f)
	}
	return nil
}

func (r *Router) audit(ctx context.Context, group, op, decision, reason string) error {
	err := r.cfg.Store.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: group, Operation: op, Decision: decision, Reason: reason})
	if err != nil {
		r.log.Error("write audit log", "err", err)
	}
	return err
}

func chatTitle(in domain.Inbound) string {
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
