// Package approval puts the owner in the loop (DESIGN.md, "Approvals"): a
// request of an agent run that needs the owner's word (a bridge tool marked
// for approval, an egress destination under egress_ask) waits while the
// owner is asked in the private chat, with inline buttons, and gets the
// owner's answer, or a denial when none comes in time. Only a press by the
// owner, on that request's message, with that request's random id counts;
// every other press is answered, audited and ignored. A run has at most
// MaxWaiting requests waiting and MaxAsked asked; a restart expires every
// request still waiting.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

// Bounds per agent run: past them a request is refused without asking, so
// that no run can flood the owner's chat.
const (
	MaxWaiting = 3  // requests waiting at once
	MaxAsked   = 20 // requests asked in the run
)

// DefaultTimeout is CLAWPEN_APPROVAL_TIMEOUT's default.
const DefaultTimeout = 2 * time.Minute

// maxShown bounds what a request shows the owner (its command or
// destination, escaped): a longer one is refused rather than cut, since a
// cut would hide part of what the owner allows.
const maxShown = 3000

// Messenger reaches the owner (Telegram in production).
type Messenger interface {
	SendButtons(ctx context.Context, chatID int64, html string, buttons []domain.Button) (int64, error)
	EditText(ctx context.Context, chatID, msgID int64, html string) error
	AnswerPress(ctx context.Context, id, text string) error
}

// Config is what a Broker works with.
type Config struct {
	Store     *store.Store
	Messenger Messenger
	// Owner is the owner's Telegram user id (0: nobody paired yet), whose
	// private chat has the same id.
	Owner   func(ctx context.Context) (int64, error)
	Timeout time.Duration // no answer within it is a denial; 0: DefaultTimeout
	TZ      *time.Location
	Logger  *slog.Logger
	Now     func() time.Time
}

// Denial is a request that was not allowed; its text follows "denied: ".
type Denial struct{ Reason string }

func (d *Denial) Error() string { return d.Reason }

// Decisions, as the approvals table and the audit log name them.
const (
	allowOnce  = "allow once"
	allowGroup = "allow for the group"
	deny       = "deny"
	timedOut   = "no answer"
	withdrawn  = "withdrawn"
	stopped    = "expired: the host stopped"
	restarted  = "expired: the host restarted"
	unsent     = "not asked"
)

// denials are what the sandbox is told of each refusal.
var denials = map[string]string{
	deny:      "the owner declined",
	timedOut:  "no answer from the owner",
	withdrawn: "the request was withdrawn before the owner answered",
	stopped:   "the host stopped before the owner answered",
	unsent:    "the owner could not be asked",
}

// Broker asks the owner and waits for the answers. It is safe for
// concurrent use.
type Broker struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // guards the following
	pending map[string]*pending
	runs    map[string]*runCount
	closed  bool
	asking  sync.WaitGroup // Ask calls in progress (Close waits for them)
}

// runCount is what one run has asked.
type runCount struct {
	waiting, asked int
	ended          bool // EndRun was called: forgotten once nothing waits
}

// pending is a request waiting for the owner.
type pending struct {
	id      string
	req     request
	html    string        // the question
	chat    int64         // set once the question was sent
	msg     int64         // (0 if it could not be)
	sent    chan struct{} // closed once chat and msg are set
	done    chan struct{} // closed once decided
	verdict verdict
}

// verdict is what became of a request.
type verdict struct {
	decision string
	by       int64 // the owner, when the owner decided
	at       time.Time
}

// request is one thing a run asks for.
type request struct {
	run, group string
	subject    string // the audit log's words: "tool NAME argv sha256:…", "egress host:port"
	question   string // HTML: what is asked, every untrusted part inert
	// egress, when set, is a destination "Allow for <group>" remembers.
	egress *store.EgressAllowance
}

// New returns a broker.
func New(cfg Config) *Broker {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TZ == nil {
		cfg.TZ = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Broker{cfg: cfg, log: cfg.Logger.With("component", "approval"), pending: map[string]*pending{}, runs: map[string]*runCount{}}
}

// Tool asks the owner whether run of group may run a bridge tool with this
// argv (the command with its arguments filled in); digest is the
// arguments' as the audit log keeps it. nil means allowed, once.
func (b *Broker) Tool(ctx context.Context, run, group, tool string, argv []string, digest string) error {
	shown := quoteArgv(argv)
	if n := len([]rune(shown)); n > maxShown {
		return &Denial{fmt.Sprintf("the command is too long to show the owner in full (%d characters; at most %d)", n, maxShown)}
	}
	q := fmt.Sprintf("Group <code>%s</code> asks to run the bridge tool <code>%s</code>, exactly this command:\n<pre>%s</pre>",
		Inert(group), Inert(tool), shown)
	_, err := b.ask(ctx, request{run: run, group: group, subject: fmt.Sprintf("tool %s args sha256:%s", tool, digest), question: q})
	return err
}

// Egress asks the owner whether run of group may connect to host:port,
// which its egress list does not hold, unless the owner allowed it for
// the group before. It answers how it was allowed, for the audit log.
func (b *Broker) Egress(ctx context.Context, run, group, host string, port int) (string, error) {
	if a, ok, err := b.cfg.Store.EgressAllowed(ctx, group, host, port); err != nil {
		return "", err
	} else if ok {
		return fmt.Sprintf("the owner, for group %s since %s", group, a.Allowed.In(b.cfg.TZ).Format("2006-01-02 15:04")), nil
	}
	dest := host + ":" + strconv.Itoa(port)
	q := fmt.Sprintf("Group <code>%s</code> asks to connect to <code>%s</code>, which its egress list does not hold.", Inert(group), Inert(dest))
	v, err := b.ask(ctx, request{run: run, group: group, subject: "egress " + dest, question: q,
		egress: &store.EgressAllowance{Group: group, Host: host, Port: port}})
	if err != nil {
		return "", err
	}
	if v.decision == allowGroup {
		return "the owner, for group " + group, nil
	}
	return "the owner, once", nil
}

// ask puts r to the owner and waits for the verdict: nil error when the
// owner allowed it.
func (b *Broker) ask(ctx context.Context, r request) (verdict, error) {
	b.mu.Lock()
	rc := b.runs[r.run]
	if rc == nil {
		rc = &runCount{}
		b.runs[r.run] = rc
	}
	var refusal string
	switch {
	case b.closed:
		refusal = "the host is stopping"
	case rc.waiting >= MaxWaiting:
		refusal = fmt.Sprintf("this run already has %d requests waiting for the owner, the most at once; wait for an answer", MaxWaiting)
	case rc.asked >= MaxAsked:
		refusal = fmt.Sprintf("this run already asked the owner %d times, the most one run may", MaxAsked)
	}
	if refusal != "" {
		// Not asked, so not the broker's to audit: the caller writes the
		// refusal within its run's audit budget (ops, the egress proxy),
		// so that a flood of calls cannot flood the log.
		b.mu.Unlock()
		return verdict{}, &Denial{refusal}
	}
	id, err := newID()
	if err != nil {
		b.mu.Unlock()
		return verdict{}, err
	}
	rc.waiting++
	rc.asked++
	p := &pending{id: id, req: r, sent: make(chan struct{}), done: make(chan struct{})}
	b.pending[id] = p
	b.asking.Add(1)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		rc.waiting--
		if rc.ended && rc.waiting == 0 {
			delete(b.runs, r.run)
		}
		delete(b.pending, id)
		b.mu.Unlock()
		b.asking.Done()
	}()

	// Sent whole even when the caller gives up meanwhile: a message
	// Telegram took is then known, and says what became of it.
	err = b.send(context.WithoutCancel(ctx), p)
	close(p.sent)
	if err != nil {
		b.log.Error("ask the owner", "group", r.group, "err", err)
		b.decide(p, verdict{decision: unsent, at: b.cfg.Now()})
	}
	timer := time.NewTimer(b.cfg.Timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		b.decide(p, verdict{decision: timedOut, at: b.cfg.Now()})
	case <-ctx.Done():
		b.decide(p, verdict{decision: withdrawn, at: b.cfg.Now()})
	}
	<-p.done
	return p.verdict, b.finish(context.WithoutCancel(ctx), p)
}

// send records p and asks the owner.
func (b *Broker) send(ctx context.Context, p *pending) error {
	owner, err := b.cfg.Owner(ctx)
	if err != nil {
		return err
	}
	if owner == 0 {
		return errors.New("no owner is paired")
	}
	now := b.cfg.Now()
	if err := b.cfg.Store.AddApproval(ctx, store.Approval{ID: p.id, Group: p.req.group, Run: p.req.run, Subject: p.req.subject, Asked: now}); err != nil {
		return err
	}
	b.audit(ctx, p.req.group, "approval", p.req.subject, "ask", fmt.Sprintf("%s: asked the owner (request %s, run %s)", p.req.subject, p.id[:8], p.req.run))
	p.html = "<b>Approval needed</b>\n" + p.req.question +
		fmt.Sprintf("\nNothing happens until you answer; no answer within %s is a denial.", b.cfg.Timeout)
	buttons := []domain.Button{{Text: "Allow once", Data: data(p.id, choiceOnce)}}
	if p.req.egress != nil {
		buttons = append(buttons, domain.Button{Text: "Allow for " + p.req.group, Data: data(p.id, choiceGroup)})
	}
	buttons = append(buttons, domain.Button{Text: "Deny", Data: data(p.id, choiceDeny)})
	msg, err := b.cfg.Messenger.SendButtons(ctx, owner, p.html, buttons)
	if err != nil {
		return err
	}
	b.mu.Lock()
	p.chat, p.msg = owner, msg
	b.mu.Unlock()
	return b.cfg.Store.SetApprovalMessage(ctx, p.id, owner, msg)
}

// decide settles p with v unless it is settled: the first decision stands.
func (b *Broker) decide(p *pending, v verdict) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	p.verdict = v
	close(p.done)
	return true
}

// finish records p's verdict, tells the owner in its message, and answers
// the request: nil when allowed.
func (b *Broker) finish(ctx context.Context, p *pending) error {
	v := p.verdict
	if _, err := b.cfg.Store.DecideApproval(ctx, p.id, v.decision, v.by, v.at); err != nil {
		b.log.Error("record an approval decision", "err", err)
	}
	if v.decision == allowGroup && p.req.egress != nil {
		a := *p.req.egress
		a.AllowedBy, a.Allowed = v.by, v.at
		if err := b.cfg.Store.AllowEgress(ctx, a); err != nil {
			b.log.Error("remember an allowed destination", "err", err)
		}
	}
	allowed := v.decision == allowOnce || v.decision == allowGroup
	decision := "allow"
	if !allowed {
		decision = "deny"
	}
	b.audit(ctx, p.req.group, "approval", p.req.subject, decision, fmt.Sprintf("%s: %s (request %s)", p.req.subject, b.said(v, p.req.group), p.id[:8]))
	b.mu.Lock()
	chat, msg := p.chat, p.msg
	b.mu.Unlock()
	if msg != 0 {
		// Beside the request's answer, not before it: an allowed call
		// need not wait for Telegram.
		b.asking.Add(1)
		go func() {
			defer b.asking.Done()
			ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := b.cfg.Messenger.EditText(ectx, chat, msg, p.html+"\n\n<b>"+b.said(v, p.req.group)+"</b>"); err != nil {
				b.log.Warn("edit the approval message", "err", err)
			}
		}()
	}
	if allowed {
		return nil
	}
	return &Denial{denials[v.decision]}
}

// said is a decision in the owner's chat: who decided what, when.
func (b *Broker) said(v verdict, group string) string {
	at := v.at.In(b.cfg.TZ).Format("15:04:05 MST")
	switch v.decision {
	case allowOnce:
		return "Allowed once, by you, at " + at + "."
	case allowGroup:
		return fmt.Sprintf("Allowed for %s from now on, by you, at %s. (/revoke takes it back.)", group, at)
	case deny:
		return "Denied, by you, at " + at + "."
	case timedOut:
		return fmt.Sprintf("Denied: no answer within %s (%s).", b.cfg.Timeout, at)
	case withdrawn:
		return "Withdrawn: the run ended before an answer (" + at + ")."
	case stopped:
		return "Denied: the host stopped before an answer (" + at + ")."
	case restarted:
		return "Expired: the host restarted before an answer (" + at + ")."
	}
	return "Denied: the owner could not be asked (" + at + ")."
}

// EndRun forgets run's counts once its socket has closed.
func (b *Broker) EndRun(run string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rc := b.runs[run]; rc != nil {
		rc.ended = true
		if rc.waiting == 0 {
			delete(b.runs, run)
		}
	}
}

// Start expires the requests a previous host left waiting: their runs are
// gone. Their messages say so; a press on one is refused.
func (b *Broker) Start(ctx context.Context) error {
	now := b.cfg.Now()
	left, err := b.cfg.Store.ExpireApprovals(ctx, restarted, now)
	if err != nil {
		return err
	}
	for _, a := range left {
		b.audit(ctx, a.Group, "approval", a.Subject, "deny", fmt.Sprintf("%s: %s (request %s)", a.Subject, restarted, shortID(a.ID)))
		a.Decision, a.Decided = restarted, now
		if a.MessageID != 0 {
			b.expiredMessage(ctx, a, a.ChatID, a.MessageID)
		}
	}
	return nil
}

// expiredMessage edits the question of a, which a previous host asked, to
// say what became of it; its buttons go with the edit.
func (b *Broker) expiredMessage(ctx context.Context, a store.Approval, chat, msg int64) {
	if a.MessageID == 0 {
		if err := b.cfg.Store.SetApprovalMessage(ctx, a.ID, chat, msg); err != nil {
			b.log.Warn("record an approval message", "err", err)
		}
	}
	v := verdict{decision: a.Decision, at: a.Decided}
	text := fmt.Sprintf("<b>Approval needed</b>\nGroup <code>%s</code> asked: <code>%s</code>\n\n<b>%s</b>",
		Inert(a.Group), Inert(a.Subject), b.said(v, a.Group))
	if err := b.cfg.Messenger.EditText(ctx, chat, msg, text); err != nil {
		b.log.Warn("edit an expired approval message", "err", err)
	}
}

// Close refuses every request still waiting (the host is stopping) and
// new ones, and returns once their messages say so.
func (b *Broker) Close() {
	b.mu.Lock()
	b.closed = true
	var ps []*pending
	for _, p := range b.pending {
		ps = append(ps, p)
	}
	b.mu.Unlock()
	for _, p := range ps {
		b.decide(p, verdict{decision: stopped, at: b.cfg.Now()})
	}
	b.asking.Wait()
}

// audit writes one decision about an approval.
func (b *Broker) audit(ctx context.Context, group, op, target, decision, reason string) {
	err := b.cfg.Store.Audit(ctx, domain.AuditEntry{Time: b.cfg.Now(), Group: group, Operation: op, Target: target, Decision: decision, Reason: reason})
	if err != nil {
		b.log.Error("write audit log", "err", err)
	}
}

// newID is a request's id: 128 random bits.
func newID() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("approval id: %w", err)
	}
	return hex.EncodeToString(r[:]), nil
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// quoteArgv is argv as Go would quote its strings (controls, format
// characters, quotes and backslashes escaped), made inert for the owner.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return Inert("[" + strings.Join(q, ", ") + "]")
}
