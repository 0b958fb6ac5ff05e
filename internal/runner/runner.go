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

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/job"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// ErrNoSandbox marks a run refused because no sandbox backend works on this
// host: nothing ran, and retrying will not help until the operator acts.
var ErrNoSandbox = errors.New("no sandbox available")

// Sandbox is a backend that runs one invocation in isolation (bwrap, Docker).
type Sandbox interface {
	Name() string
	Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error)
}

// Config holds what every invocation shares.
type Config struct {
	GroupsDir     string
	DataDir       string
	RunAsUID      int // owner of what the sandbox writes; -1 = the host's own
	RunAsGID      int
	AssistantName string
	Provider      string
	Model         string
	Env           map[string]string // allowlisted, non-secret
	Limits        sandbox.Limits
	Upstreams     hostsock.Config // provider URLs and keys; IPC set per call
	// Mounts validates a group's extra mounts right before each invocation
	// and returns what may be bound; nil means none.
	Mounts func(ctx context.Context, g domain.Group) []sandbox.Mount
	Logger *slog.Logger
}

// Runner is safe for concurrent use by different groups.
type Runner struct {
	cfg     Config
	sandbox Sandbox

	ipc hostsock.IPCFunc // answers /ipc/* for every invocation

	mu      sync.Mutex
	running map[string]time.Time // invocation id -> start, for /status
}

// SetIPC sets the handler of the agents' host operations. Call before the first Run.
func (r *Runner) SetIPC(f hostsock.IPCFunc) { r.ipc = f }

// New returns a Runner for the given backend.
func New(cfg Config, sb Sandbox) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runner{cfg: cfg, sandbox: sb, running: map[string]time.Time{}}
}

// Backend names the sandbox backend in use.
func (r *Runner) Backend() string { return r.sandbox.Name() }

// Running reports how many sandboxes are running now.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// Request is one invocation for a group.
type Request struct {
	Group       domain.Group
	Prompt      string
	ContextMode string // group or isolated
	TaskID      int64
	// OnResult, when set, takes the agent's answer as soon as its result
	// line arrives (every line before it well formed), while the sandbox is
	// still ending: the answer need not wait for the teardown. Once it
	// returned nil, Run reports success whatever the sandbox does next (the
	// answer is recorded); an error from it fails the run.
	OnResult func(ctx context.Context, text string) error
}

// Answer is the agent's final text (internal parts already removed by the agent).
type Answer struct {
	Text     string
	Duration time.Duration
}

// SocketsDir is where per-invocation sockets live under the data dir.
func SocketsDir(dataDir string) string { return filepath.Join(dataDir, "sockets") }

// SessionDir is the group's agent home on the host.
func SessionDir(dataDir, folder string) string { return filepath.Join(dataDir, "sessions", folder) }

// Run executes one invocation and returns the agent's answer.
func (r *Runner) Run(ctx context.Context, req Request) (Answer, error) {
	folder := req.Group.Folder
	inv, err := invocationID()
	if err != nil {
		return Answer{}, err
	}
	groupDir := filepath.Join(r.cfg.GroupsDir, folder)
	globalDir := filepath.Join(r.cfg.GroupsDir, domain.GlobalFolder)
	sessionDir := SessionDir(r.cfg.DataDir, folder)
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{groupDir, 0o755}, {globalDir, 0o755}, {sessionDir, 0o700}} {
		if err := r.ensureDir(d.path, d.mode); err != nil {
			return Answer{}, err
		}
	}

	sockDir := filepath.Join(SocketsDir(r.cfg.DataDir), inv)
	hcfg := r.cfg.Upstreams
	hcfg.IPC = r.ipc
	hcfg.Logger = r.cfg.Logger
	srv, err := hostsock.Listen(filepath.Join(sockDir, "host.sock"), r.cfg.RunAsUID, r.cfg.RunAsGID,
		hostsock.Identity{Group: folder, ChatID: req.Group.ChatID, IsMain: req.Group.IsMain(), InvocationID: inv}, hcfg)
	if err != nil {
		return Answer{}, fmt.Errorf("open host socket for %q: %w", folder, err)
	}
	defer func() {
		_ = srv.Close()
		_ = os.RemoveAll(sockDir)
	}()

	mode := req.ContextMode
	if mode == "" {
		mode = domain.ContextGroup
	}
	stdin, err := json.Marshal(job.Job{
		Version: job.Version, Group: folder, ChatID: req.Group.ChatID, IsMain: req.Group.IsMain(),
		AssistantName: r.cfg.AssistantName, Provider: r.cfg.Provider, Model: r.cfg.Model,
		ContextMode: mode, Prompt: req.Prompt, TaskID: req.TaskID,
	})
	if err != nil {
		return Answer{}, fmt.Errorf("encode job: %w", err)
	}

	var extra []sandbox.Mount
	if r.cfg.Mounts != nil {
		extra = r.cfg.Mounts(ctx, req.Group)
	}
	var out bytes.Buffer
	var stdout io.Writer = &out
	early := newEarlyResult(ctx, req.OnResult)
	if early != nil {
		stdout = io.MultiWriter(&out, early)
	}
	spec := sandbox.Spec{
		InvocationID: inv, Group: folder, IsMain: req.Group.IsMain(),
		GroupDir: groupDir, GlobalDir: globalDir, GlobalWritable: req.Group.IsMain(),
		SessionDir: sessionDir, SocketPath: srv.Path(), Extra: extra,
		Env: r.cfg.Env, Stdin: stdin, Stdout: stdout, Limits: r.cfg.Limits,
	}

	r.mu.Lock()
	r.running[inv] = time.Now()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, inv)
		r.mu.Unlock()
	}()

	log := r.cfg.Logger.With("group", folder, "invocation", inv, "backend", r.sandbox.Name())
	log.Info("sandbox start")
	res, err := r.sandbox.Run(ctx, spec)
	if early != nil {
		if text, handled, herr := early.wait(); handled {
			if herr != nil {
				return Answer{}, fmt.Errorf("record the answer of %q: %w", folder, herr)
			}
			if err != nil || res.ExitCode != 0 || res.TimedOut || res.OutputTruncated {
				log.Warn("sandbox ended badly after its answer was recorded", "err", err, "exit", res.ExitCode,
					"timed_out", res.TimedOut, "truncated", res.OutputTruncated, "stderr", lastLine(res.Stderr))
			}
			return Answer{Text: text, Duration: res.Duration}, nil
		}
	}
	if err != nil {
		return Answer{}, fmt.Errorf("run sandbox for %q: %w", folder, err)
	}
	log.Info("sandbox done", "exit", res.ExitCode, "duration", res.Duration, "timed_out", res.TimedOut)
	text, agentErr := parseOutput(&out)
	switch {
	case res.TimedOut:
		return Answer{}, fmt.Errorf("agent for %q exceeded its time limit of %s", folder, spec.Limits.Timeout)
	case res.OutputTruncated:
		return Answer{}, fmt.Errorf("agent for %q exceeded its output limit of %d bytes", folder, spec.Limits.OutputBytes)
	case agentErr != nil:
		return Answer{}, fmt.Errorf("agent for %q: %w", folder, agentErr)
	case res.ExitCode != 0:
		return Answer{}, fmt.Errorf("agent for %q exited with %d: %s", folder, res.ExitCode, lastLine(res.Stderr))
	}
	if req.OnResult != nil { // a last line without its newline: taken only now
		if err := req.OnResult(ctx, text); err != nil {
			return Answer{}, fmt.Errorf("record the answer of %q: %w", folder, err)
		}
	}
	return Answer{Text: text, Duration: res.Duration}, nil
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
	ev, err := job.ParseEvent(b)
	switch {
	case err != nil:
		v.err = err
	case ev.Type == job.EventError:
		v.err = errors.New(ev.Error)
	case ev.Type == job.EventResult && v.result == nil:
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

func (r *Runner) ensureDir(path string, mode os.FileMode) error {
	if err := os.MkdirAll(path, mode); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if r.cfg.RunAsUID >= 0 && os.Geteuid() == 0 {
		if err := os.Lchown(path, r.cfg.RunAsUID, r.cfg.RunAsGID); err != nil {
			return fmt.Errorf("hand %s to the sandbox user: %w", path, err)
		}
	}
	return nil
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
