// Package runner runs one agent invocation: it prepares the group's folders,
// opens the invocation's host socket, starts the sandbox with the job, and
// reads the agent's answer from its output.
package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// ErrNoSandbox marks a run refused because no sandbox backend works on this
// host: nothing ran, and retrying will not help until the operator acts.
var ErrNoSandbox = errors.New("no sandbox available")

// Why an agent run failed, for notices in the host's own words (errors.Is
// and errors.As on Run's error find them). The error's full text may quote
// the agent (its error event, its stderr): it is for the host's log only.
var (
	ErrTimedOut    = errors.New("time limit exceeded")
	ErrOutputLimit = errors.New("output limit exceeded")
	ErrAgent       = errors.New("agent error") // an error event, malformed output, no result
)

// LimitError is a run that reached one of its sandbox's limits, as the host
// saw it: the kernel killed a process at the memory limit or refused one
// past the process limit (the backend read it from the cgroup or the
// engine), or the host's watcher stopped the sandbox at the disk quota. It
// is why the run ended, whatever the sandbox wrote; its fields are the
// host's own, fit for a chat.
type LimitError struct {
	Limit sandbox.Limit
	Max   int64 // the limit: bytes (memory, disk) or processes
	Err   error // the disk watcher's finding, which wraps ErrDiskQuota; nil for the others
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("the sandbox reached its %s limit (%d)", e.Limit, e.Max)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *LimitError) Unwrap() error { return e.Err }

// limitReached is the limit a run reached, if any: the disk quota its
// watcher stopped it at (cause, the sandbox context's), else the cgroup
// limit its backend saw enforced.
func limitReached(res sandbox.Result, cause error, lim sandbox.Limits) *LimitError {
	switch {
	case errors.Is(cause, ErrDiskQuota):
		return &LimitError{Limit: sandbox.DiskLimit, Max: lim.DiskBytes, Err: cause}
	case res.Limit == sandbox.MemoryLimit:
		return &LimitError{Limit: res.Limit, Max: lim.MemoryBytes}
	case res.Limit == sandbox.ProcessLimit:
		return &LimitError{Limit: res.Limit, Max: int64(lim.Pids)}
	}
	return nil
}

// ExitError is an agent that exited with a non-zero code.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exited with code %d", e.Code) }

// Sandbox is a backend that runs one invocation in isolation (bwrap, Docker).
type Sandbox interface {
	Name() string
	Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error)
}

// Config holds what every invocation shares.
type Config struct {
	// GroupsDir and DataDir are resolved (config.FromEnv): every path the
	// runner opens below them is refused if a symlink appears in it.
	GroupsDir     string
	DataDir       string
	RunAsUID      int // owner of what the sandbox writes; -1 = the host's own
	RunAsGID      int
	AssistantName string
	Provider      string
	Model         string
	Env           map[string]string // allowlisted, non-secret
	// ContextTokens is where a group's conversation is compacted
	// (CLAWPEN_CONTEXT_TOKENS); 0 is domain.DefaultContextTokens.
	ContextTokens int64
	Limits        sandbox.Limits
	// Upstreams: provider URLs and keys, and the ledger of model requests
	// in flight that all runs share (New makes one when it is nil); the
	// rest is set per run.
	Upstreams hostsock.Config
	// Ops answers the agents' requests to the host (/ipc/<op> on their
	// sockets); nil answers none.
	Ops *ops.Service
	// Profile resolves a group's sandbox profile by name, right before each
	// invocation (the file is read at each run); nil gives every group the
	// built-in default. An error refuses the run (ErrProfile).
	Profile func(name string) (domain.Profile, error)
	// Mounts validates a group's extra mounts right before each invocation;
	// nil grants none.
	Mounts *mounts.Policy
	// Audit records what the host refused a run: extra mounts, and the
	// model proxy's refusals.
	Audit func(ctx context.Context, e domain.AuditEntry) error
	// Usage keeps the groups' token use: the model proxy records it, and a
	// profile's daily budget is checked against it before every run (and
	// by the proxy before every model call). Now and TZ place it in days
	// (default time.Now, time.Local).
	Usage hostsock.UsageBook
	Now   func() time.Time
	TZ    *time.Location
	// Warm keeps sandboxes started ahead of their jobs (warm.go); a zero
	// Size turns it off.
	Warm   WarmConfig
	Logger *slog.Logger
	// Guard finds the host's secrets in prompts before a sandbox gets them,
	// and in what its egress proxy reads; it is refreshed at each run (the
	// profiles and tools as they are then). nil: none looked for.
	Guard *leakguard.Guard
	// SystemRoots is the host's system roots as PEM: with the run's CA, the
	// bundle a sandbox whose profile holds credentials trusts.
	SystemRoots []byte
}

// Runner is safe for concurrent use by different groups.
type Runner struct {
	cfg     Config
	sandbox Sandbox

	warm *warmPool // nil: off

	mu     sync.Mutex
	active map[string]int  // folder -> runs in progress (see Forget)
	forget map[string]bool // folders to forget again when their runs end
}

// New returns a Runner for the given backend.
func New(cfg Config, sb Sandbox) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Upstreams.Ledger == nil {
		// One for all runs: a group's runs at once share its budget.
		cfg.Upstreams.Ledger = hostsock.NewLedger()
	}
	r := &Runner{cfg: cfg, sandbox: sb, active: map[string]int{}, forget: map[string]bool{}}
	r.warm = newWarmPool(r, cfg.Warm)
	return r
}

// Backend names the sandbox backend in use.
func (r *Runner) Backend() string { return r.sandbox.Name() }

// Request is one invocation for a group.
type Request struct {
	Group       domain.Group
	Prompt      string
	ContextMode string // group or isolated
	TaskID      int64
	// Progress, when set, is told the answer so far each time the agent
	// writes it (a progress line before its result). It is called while the
	// agent's output is read, so it must not block.
	Progress func(text string)
	// Command, for Exec, runs instead of the agent in the same sandbox,
	// connected to Stdio; no job is given.
	Command []string
	Stdio   *sandbox.Stdio
}

// Answer is the agent's final text (internal parts already removed by the agent).
type Answer struct {
	Text     string
	Duration time.Duration
	ExitCode int // Exec only: the command's exit code (128+signal when killed)
}

// Exec runs req.Command in the group's sandbox exactly as the group's agent
// would run (view, profile, limits, budget, host socket with its tools) and
// returns once the sandbox is gone. A command that ran has its exit code in
// the answer, also when the error says it was stopped (time or output limit).
func (r *Runner) Exec(ctx context.Context, req Request) (Answer, error) {
	if len(req.Command) == 0 || req.Stdio == nil {
		return Answer{}, errors.New("exec needs a command and its stdio")
	}
	return r.run(ctx, req, NewInvocation())
}

// SocketsDir is where per-invocation sockets live under the data dir.
func SocketsDir(dataDir string) string { return filepath.Join(dataDir, "sockets") }

// socketPath is invocation inv's host socket.
func socketPath(dataDir, inv string) string {
	return filepath.Join(SocketsDir(dataDir), inv, "host.sock")
}

// CheckSocket makes a host socket as a run does, owned by uid:gid (-1: the
// host's own), and removes it: doctor learns whether this data dir can
// hold one.
func CheckSocket(dataDir string, uid, gid int) error {
	inv, err := invocationID()
	if err != nil {
		return err
	}
	path := socketPath(dataDir, "check-"+inv)
	defer os.RemoveAll(filepath.Dir(path))
	srv, err := hostsock.Listen(path, uid, gid, domain.Caller{Group: "check", Run: inv}, hostsock.Config{})
	if err != nil {
		return err
	}
	return srv.Close()
}

// bridgeTools are the host bridge tools c may call under prof, for its job.
func (r *Runner) bridgeTools(c domain.Caller, prof domain.Profile) []domain.JobTool {
	if r.cfg.Ops == nil {
		return nil
	}
	return r.cfg.Ops.ToolsFor(c, prof)
}

// SessionDir is the group's agent home on the host.
func SessionDir(dataDir, folder string) string { return filepath.Join(dataDir, "sessions", folder) }

// Start begins one invocation and returns it at once; the run goes on until
// its sandbox is gone. Its answer arrives on Answer as soon as the agent's
// result line does, while the sandbox is still ending: the answer need not
// wait for the teardown.
func (r *Runner) Start(ctx context.Context, req Request) *Invocation {
	iv := NewInvocation()
	go func() { iv.Finish(r.run(ctx, req, iv)) }()
	return iv
}

// run executes one invocation, hands its answer to iv and returns it.
func (r *Runner) run(ctx context.Context, req Request, iv *Invocation) (Answer, error) {
	folder := req.Group.Folder
	groupDir := filepath.Join(r.cfg.GroupsDir, folder)
	sessionDir := SessionDir(r.cfg.DataDir, folder)
	if err := r.ensureDirs(ctx, req.Group); err != nil {
		return Answer{}, err
	}

	v, err := r.viewOf(ctx, req.Group, true)
	if err != nil {
		return Answer{}, err
	}
	r.cfg.Guard.Refresh()
	req.Prompt = r.redactPrompt(ctx, req)
	if err := r.checkBudget(ctx, req.Group, v.prof); err != nil {
		return Answer{}, fmt.Errorf("run for %q: %w", folder, err)
	}
	if _, err := checkDisk(v.limits.DiskBytes, groupDir, sessionDir); err != nil {
		return Answer{}, fmt.Errorf("run for %q: %w", folder, err)
	}

	// The run counts as active from before its sandbox starts: a /new from
	// then on forgets what this run saves as it ends. Deferred first, it
	// runs last, once the sandbox is gone.
	r.mu.Lock()
	r.active[folder]++
	r.mu.Unlock()
	defer r.runEnded(folder)

	// A warm sandbox made in this very view takes the job; a cold one is
	// started for it otherwise. `clawpen run` is always cold.
	var sr *sandboxRun
	warm := false
	if req.Command == nil {
		sr = r.warm.take(folder, v.key)
	}
	if sr != nil {
		warm = true
		// The request's end (a cancelled run, the host stopping) ends the
		// sandbox, which the warm pool started under its own context.
		defer context.AfterFunc(ctx, func() { sr.stop(context.Cause(ctx)) })()
	} else if sr, err = r.launch(ctx, v, req.Command, req.Stdio); err != nil {
		return Answer{}, err
	}
	defer sr.close()
	if req.Command == nil {
		// The pool's next sandbox for this group starts once this one is
		// gone (after its teardown and strip, below).
		defer r.warm.ran(req.Group)
	}
	limits, inv := v.limits, sr.inv

	var stdin []byte
	if req.Command == nil {
		archived := r.archiveBefore(req, limits, r.cfg.Logger.With("group", folder, "invocation", inv))
		stdin, err = r.job(req, inv, v.prof, archived)
		if err != nil {
			sr.stop(err)
			<-sr.done
			return Answer{}, err
		}
	}

	log := r.cfg.Logger.With("group", folder, "invocation", inv, "backend", r.sandbox.Name())
	log.Info("sandbox start", "warm", warm)
	// The disk watcher stops the sandbox through its context's cause, which
	// tells a quota stop from a timeout or a host shutdown.
	watchCtx, stopWatch := context.WithCancel(sr.ctx)
	peak := make(chan diskUsage, 1)
	go func() {
		peak <- watchDisk(watchCtx, limits.DiskBytes, func(err error) {
			log.Warn("stopping the sandbox: disk quota", "err", err)
			sr.stop(err)
		}, groupDir, sessionDir)
	}()
	if req.Command == nil {
		sr.give(stdin, iv, req.Progress)
	}
	<-sr.done
	res, err := sr.res, sr.err
	stopWatch()
	r.stripAfterRun(ctx, sr.spec, log)
	log.Debug("disk use", "peak", <-peak)
	// A limit is why a run that ended by itself (or at the disk quota)
	// ended; a run that could not start, or was cancelled, ended for that.
	limit := limitReached(res, context.Cause(sr.ctx), limits)
	switch {
	case limit != nil && limit.Limit == sandbox.DiskLimit:
		err = limit
	case err != nil:
		limit = nil
	}
	if limit != nil {
		log.Warn("the sandbox reached a limit", "limit", limit.Limit, "max", limit.Max)
	}
	if req.Command != nil {
		return execAnswer(folder, limits, res, err, limit)
	}
	if text, ok := sr.early.answer(); ok {
		if err != nil || res.ExitCode != 0 || res.TimedOut || res.OutputTruncated || limit != nil {
			log.Warn("sandbox ended badly after its answer was given", "err", err, "exit", res.ExitCode,
				"timed_out", res.TimedOut, "truncated", res.OutputTruncated, "stderr", lastLine(res.Stderr))
		}
		return Answer{Text: text, Duration: res.Duration}, nil
	}
	if limit != nil && err == nil {
		return Answer{}, fmt.Errorf("agent for %q: %w", folder, limit)
	}
	if b, ok := sr.srv.BudgetRefused(); ok {
		// The agent's call was refused and its run ended without an
		// answer: that is why, whatever the agent made of it.
		log.Info("run ended at the daily token budget", "budget", b.Budget, "used", b.Used, "exit", res.ExitCode)
		return Answer{}, fmt.Errorf("agent for %q: %w", folder, budgetRefusal(b))
	}
	if err != nil {
		return Answer{}, fmt.Errorf("run sandbox for %q: %w", folder, err)
	}
	log.Info("sandbox done", "exit", res.ExitCode, "duration", res.Duration, "timed_out", res.TimedOut)
	text, agentErr := parseOutput(sr.out.reader())
	switch {
	case res.TimedOut:
		return Answer{}, fmt.Errorf("agent for %q: %w (%s)", folder, ErrTimedOut, limits.Timeout)
	case res.OutputTruncated:
		return Answer{}, fmt.Errorf("agent for %q: %w (%d bytes)", folder, ErrOutputLimit, limits.OutputBytes)
	case agentErr != nil:
		return Answer{}, fmt.Errorf("agent for %q: %w: %w", folder, ErrAgent, agentErr)
	case res.ExitCode != 0:
		return Answer{}, fmt.Errorf("agent for %q: %w: %s", folder, &ExitError{Code: res.ExitCode}, lastLine(res.Stderr))
	}
	iv.answered(text) // a last line without its newline: taken only now
	return Answer{Text: text, Duration: res.Duration}, nil
}

// archiveBefore archives the group's transcript before a run whose
// conversation may pass the context budget, and says whether it did: only
// then may the agent compact it. A copy that fails is logged; the agent
// then keeps the conversation whole.
func (r *Runner) archiveBefore(req Request, limits sandbox.Limits, log *slog.Logger) bool {
	if req.ContextMode == domain.ContextIsolated || !r.mayCompact(req.Group.Folder, req.Prompt, r.contextTokens()) {
		return false
	}
	if err := ArchiveCopy(r.cfg.DataDir, req.Group.Folder, limits.DiskBytes, time.Now()); err != nil {
		log.Warn("the conversation is long but could not be archived; it is not compacted", "err", err)
		return false
	}
	log.Info("archived the conversation before a run that may compact it")
	return true
}

func (r *Runner) contextTokens() int64 {
	if r.cfg.ContextTokens > 0 {
		return r.cfg.ContextTokens
	}
	return domain.DefaultContextTokens
}

// job is the agent's job on its stdin.
func (r *Runner) job(req Request, inv string, prof domain.Profile, archived bool) ([]byte, error) {
	mode := req.ContextMode
	if mode == "" {
		mode = domain.ContextGroup
	}
	b, err := json.Marshal(domain.Job{
		Version: domain.JobVersion, Group: req.Group.Folder, ChatID: req.Group.ChatID, IsMain: req.Group.IsMain(),
		AssistantName: r.cfg.AssistantName, Provider: r.cfg.Provider, Model: r.model(prof),
		ContextMode: mode, Prompt: req.Prompt, TaskID: req.TaskID, Egress: prof.HasNetwork(),
		Tools:         r.bridgeTools(req.Group.Caller(inv), prof),
		ContextTokens: r.contextTokens(), Archived: archived,
	})
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	return b, nil
}

// redactPrompt is req's prompt with the host's secrets replaced: what
// users wrote and what tasks hold reaches a sandbox without them.
func (r *Runner) redactPrompt(ctx context.Context, req Request) string {
	out, f := r.cfg.Guard.Redact(req.Prompt)
	if f.Found() {
		reason := fmt.Sprintf("redacted %s from the prompt of a run", f)
		r.cfg.Logger.Warn("leak guard", "group", req.Group.Folder, "reason", reason)
		if r.cfg.Audit != nil {
			_ = r.cfg.Audit(context.WithoutCancel(ctx), domain.AuditEntry{Time: time.Now(), Group: req.Group.Folder, Operation: "leakguard", Decision: "deny", Reason: reason})
		}
	}
	return out
}

// execAnswer is what Exec tells of a command's sandbox run.
func execAnswer(folder string, lim sandbox.Limits, res sandbox.Result, err error, limit *LimitError) (Answer, error) {
	a := Answer{Duration: res.Duration, ExitCode: res.ExitCode}
	switch {
	case err != nil:
		return a, fmt.Errorf("run sandbox for %q: %w", folder, err)
	case limit != nil:
		return a, fmt.Errorf("command in %q: %w", folder, limit)
	case res.TimedOut:
		return a, fmt.Errorf("command in %q: %w (%s)", folder, ErrTimedOut, lim.Timeout)
	case res.OutputTruncated:
		return a, fmt.Errorf("command in %q: %w (%d bytes)", folder, ErrOutputLimit, lim.OutputBytes)
	}
	return a, nil
}

// extraMounts validates g's extra mounts against the allowlist as it is now
// and returns what may be bound; every refusal is logged and audited.
func (r *Runner) extraMounts(ctx context.Context, g domain.Group) []sandbox.Mount {
	if r.cfg.Mounts == nil {
		return nil
	}
	ms, refused := r.cfg.Mounts.Resolve(g)
	for _, f := range refused {
		r.cfg.Logger.Warn("extra mount refused", "group", g.Folder, "rule", f.Rule, "path", f.Path, "reason", f.Reason)
		if r.cfg.Audit != nil {
			_ = r.cfg.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: g.Folder, Operation: "mount", Decision: "deny", Reason: f.Reason})
		}
	}
	return ms
}

// parseOutput reads the agent's event lines (see verdict).
func parseOutput(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var v verdict
	for sc.Scan() {
		v.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read agent output: %w", err)
	}
	return v.answer()
}

// verdict is what the agent's output lines say so far: the first result is
// the answer; an error event, or a garbage line anywhere, makes the run an
// error, so broken output is never sent to a chat.
type verdict struct {
	result *string
	err    error
}

// line takes one output line and reports whether it gave the answer: the
// first result, with every line before it well formed.
func (v *verdict) line(b []byte) (answered bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || v.err != nil {
		return false
	}
	ev, err := domain.ParseEvent(b)
	switch {
	case err != nil:
		v.err = err
	case ev.Type == domain.EventError:
		v.err = errors.New(ev.Error)
	case ev.Type == domain.EventResult && v.result == nil:
		t := ev.Text
		v.result = &t
		return true
	}
	return false
}

func (v *verdict) answer() (string, error) {
	switch {
	case v.err != nil:
		return "", v.err
	case v.result == nil:
		return "", errors.New("agent ended without a result")
	}
	return *v.result, nil
}

// ensureDirs makes the folders g's sandbox binds. The sandbox user owns
// the group's folders. groups/global is written, and so owned, by main
// alone: a non-main run sees it read-only and never takes it over.
func (r *Runner) ensureDirs(ctx context.Context, g domain.Group) error {
	if err := r.ensureDir(ctx, filepath.Join(r.cfg.GroupsDir, g.Folder), 0o755, true); err != nil {
		return err
	}
	if err := r.ensureDir(ctx, filepath.Join(r.cfg.GroupsDir, domain.GlobalFolder), 0o755, g.IsMain()); err != nil {
		return err
	}
	return r.ensureDir(ctx, SessionDir(r.cfg.DataDir, g.Folder), 0o700, true)
}

// ensureDir creates path; with own, a root host also gives it to the
// sandbox user (beneath.User.Own): a folder that is not the sandbox user's
// yet (new, made by hand, or from before the dedicated user) is handed over
// whole, once. path is resolved (Config): a symlink anywhere in it now is
// refused.
func (r *Runner) ensureDir(ctx context.Context, path string, mode os.FileMode, own bool) error {
	u := beneath.User{} // the host's: made, never handed over
	if own {
		u = beneath.User{UID: r.cfg.RunAsUID, GID: r.cfg.RunAsGID}
	}
	rep, err := u.Own(ctx, path, uint32(mode.Perm()))
	if err != nil {
		return err
	}
	if rep.Entries > 0 {
		r.cfg.Logger.Info("handed a folder to the sandbox user", "path", path, "uid", r.cfg.RunAsUID,
			"entries", rep.Entries, "changed", rep.Changed, "skipped", rep.Skipped, "cut_short", rep.CutShort)
	}
	return nil
}

// stripAfterRun takes setuid, setgid and world-write bits out of every tree
// the sandbox could write, once it is gone, so nothing it left becomes a
// privilege on the host. Only the sandbox user's entries are touched: a
// sandbox can set bits on nothing else (chmod needs the owner), and so the
// host changes only what the sandbox itself could have changed, never a
// person's setgid project directory in an extra mount or a file another
// owner left in a group's folder. Failures are logged; the run's outcome
// stands.
func (r *Runner) stripAfterRun(ctx context.Context, spec sandbox.Spec, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx) // also after a cancelled run
	sandboxUser := r.cfg.RunAsUID
	if sandboxUser < 0 {
		sandboxUser = os.Geteuid()
	}
	trees := []string{spec.GroupDir, spec.SessionDir}
	if spec.GlobalWritable {
		trees = append(trees, spec.GlobalDir)
	}
	for _, m := range spec.Extra {
		if !m.ReadOnly {
			trees = append(trees, m.HostPath)
		}
		trees = append(trees, m.Writable...)
	}
	for _, t := range trees {
		if t == "" {
			continue
		}
		rep, err := beneath.Strip(ctx, t, sandboxUser, beneath.DefaultWalkLimits)
		switch {
		case err != nil:
			log.Error("strip setuid, setgid and world-write bits after the run", "tree", t, "err", err)
		case rep.CutShort != "":
			log.Warn("stripping setuid, setgid and world-write bits was cut short; what was not visited keeps them",
				"tree", t, "reason", rep.CutShort, "entries", rep.Entries, "stripped", rep.Changed)
		case rep.Changed > 0:
			log.Warn("the sandbox left setuid, setgid or world-writable entries; stripped", "tree", t, "count", rep.Changed)
		}
	}
	log.Debug("after-run strip done")
}

func invocationID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("invocation id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	if s == "" {
		return "no error output"
	}
	return s
}
