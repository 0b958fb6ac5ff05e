// Package app assembles the host: store, Telegram adapter, router, queue,
// sandbox backend and runner, for `clawpen serve`.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/ipc"
	"github.com/clawpen/clawpen/internal/policy"
	"github.com/clawpen/clawpen/internal/queue"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
	"github.com/clawpen/clawpen/internal/sandbox/pin"
	"github.com/clawpen/clawpen/internal/scheduler"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
)

const offsetKey = "telegram_offset"

// DBPath is the database file under the data dir.
func DBPath(dataDir string) string { return filepath.Join(dataDir, "clawpen.db") }

// OpenStore prepares the data dir and opens the database.
func OpenStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, DBPath(cfg.DataDir))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// PinDir is where a root host pins bind sources for bwrap: on /run (a
// tmpfs every user can traverse), one directory per data dir.
func PinDir(cfg config.Config) string {
	sum := sha256.Sum256([]byte(cfg.DataDir))
	return filepath.Join("/run/clawpen", hex.EncodeToString(sum[:6]))
}

// prepareDataDir creates data/ private to the host: sandboxes reach their
// session dir and socket through pinned binds (root host), Docker's engine,
// or as the host user itself.
func prepareDataDir(dir string) error {
	mode := os.FileMode(0o700)
	for _, d := range []string{dir, filepath.Join(dir, "sessions"), runner.SocketsDir(dir)} {
		if err := os.MkdirAll(d, mode); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := os.Chmod(d, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	return nil
}

// SandboxUser is the host user the sandbox runs as. A non-root host runs it
// as itself; a root host uses the owner of groups/, or uid/gid 1000 when
// groups/ belongs to root, so sandbox uid 1000 never maps to host root.
func SandboxUser(groupsDir string) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return -1, -1, nil
	}
	if err := os.MkdirAll(groupsDir, 0o755); err != nil {
		return 0, 0, fmt.Errorf("create %s: %w", groupsDir, err)
	}
	fi, err := os.Stat(groupsDir)
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", groupsDir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && st.Uid != 0 {
		return int(st.Uid), int(st.Gid), nil
	}
	return sandbox.UID, sandbox.GID, nil
}

// AgentBin finds clawpen-agent: CLAWPEN_AGENT_BIN, beside this executable, then $PATH.
func AgentBin(cfg config.Config) (string, error) {
	if cfg.AgentBin != "" {
		if _, err := os.Stat(cfg.AgentBin); err != nil {
			return "", fmt.Errorf("CLAWPEN_AGENT_BIN=%s: %w", cfg.AgentBin, err)
		}
		return filepath.Abs(cfg.AgentBin)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "clawpen-agent")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("clawpen-agent")
	if err != nil {
		return "", errors.New("clawpen-agent not found beside clawpen nor in $PATH: run `make build` or set CLAWPEN_AGENT_BIN")
	}
	return filepath.Abs(p)
}

// unavailable is the backend when no sandbox can be made: every run fails
// with the reason, so the chat and the log say why. Nothing runs unsandboxed.
type unavailable struct{ err error }

func (u unavailable) Name() string { return "none" }
func (u unavailable) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{}, fmt.Errorf("%w: %w", runner.ErrNoSandbox, u.err)
}

// Backend picks the sandbox backend as CLAWPEN_SANDBOX asks: docker, bwrap,
// or auto (Docker when the engine answers and the agent image exists, else
// bwrap). It never returns an unsandboxed runner: when nothing works it
// returns one that refuses every run with the reasons. The uid/gid are the
// host user the sandbox writes as; close releases the backend.
func Backend(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger) (sb runner.Sandbox, uid, gid int, close func()) {
	noop := func() {}
	var reasons []string
	if cfg.Sandbox == "docker" || cfg.Sandbox == "auto" {
		d, err := dockerBackend(ctx, cfg, getenv, log)
		if err == nil {
			return d, sandbox.UID, sandbox.GID, func() { _ = d.Close() }
		}
		if cfg.Sandbox == "docker" {
			return unavailable{fmt.Errorf("no sandbox: CLAWPEN_SANDBOX=docker: %w", err)}, -1, -1, noop
		}
		log.Info("Docker sandbox not available; trying bubblewrap", "reason", err)
		reasons = append(reasons, "docker: "+err.Error())
	}
	uid, gid, err := SandboxUser(cfg.GroupsDir)
	if err != nil {
		return unavailable{fmt.Errorf("no sandbox: %w", err)}, -1, -1, noop
	}
	b, err := bwrapBackend(ctx, cfg, uid, gid, log)
	if err != nil {
		reasons = append(reasons, "bwrap: "+err.Error())
		return unavailable{fmt.Errorf("no sandbox: %s", strings.Join(reasons, "; "))}, uid, gid, noop
	}
	return b, uid, gid, noop
}

func bwrapBackend(ctx context.Context, cfg config.Config, uid, gid int, log *slog.Logger) (*bwrap.Backend, error) {
	bin, err := AgentBin(cfg)
	if err != nil {
		return nil, err
	}
	bc := bwrap.Config{AgentBin: bin, RunAsUID: uid, RunAsGID: gid, Logger: log}
	if os.Geteuid() == 0 {
		// The unprivileged sandbox user binds pinned copies of the sources,
		// so the project may live anywhere, /root included.
		bc.PinDir = PinDir(cfg)
		if err := pin.Clean(bc.PinDir); err != nil {
			return nil, err
		}
	}
	b, err := bwrap.New(bc)
	if err != nil {
		return nil, err
	}
	if err := b.Check(ctx); err != nil {
		return nil, fmt.Errorf("bubblewrap cannot create its namespaces: %w", err)
	}
	return b, nil
}

// dockerBackend connects to the engine and checks the image. The container
// runs as uid 1000 with no user-namespace mapping, so the host must be root
// (it hands the group's folders to 1000) or be uid 1000 itself.
func dockerBackend(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger) (*docker.Backend, error) {
	if euid := os.Geteuid(); euid != 0 && euid != sandbox.UID {
		return nil, fmt.Errorf("the Docker sandbox writes as uid %d; run the host as root or as uid %d", sandbox.UID, sandbox.UID)
	}
	dc := docker.Config{Image: cfg.AgentImage, Runtime: getenv("CLAWPEN_DOCKER_RUNTIME"), HostPath: hostPathMapper(getenv), Instance: cfg.DataDir, Logger: log}
	if os.Geteuid() == 0 && dc.HostPath == nil {
		// Extra mounts are pinned by descriptor (see docker/pin.go); a
		// containerised host cannot do this and binds by validated path.
		dc.PinDir = filepath.Join(cfg.DataDir, "pins")
		if err := pin.Clean(dc.PinDir); err != nil {
			return nil, err
		}
	}
	d, err := docker.New(ctx, dc)
	if err != nil {
		return nil, err
	}
	if err := d.Check(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// hostPathMapper translates paths of this process into paths on the Docker
// host, for a host that itself runs in a container: CLAWPEN_HOST_ROOT=/srv/clawpen
// with CLAWPEN_ROOT=/app means /app/groups/x is /srv/clawpen/groups/x to the engine.
func hostPathMapper(getenv func(string) string) func(string) string {
	hostRoot, root := getenv("CLAWPEN_HOST_ROOT"), getenv("CLAWPEN_ROOT")
	if hostRoot == "" || root == "" {
		return nil
	}
	root = filepath.Clean(root)
	return func(p string) string {
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return p
		}
		return filepath.Join(hostRoot, rel)
	}
}

// RetryBackoff reads CLAWPEN_RETRY_BACKOFF ("5s,30s,2m"), the waits between
// retries of a failed agent run before the chat is told.
func RetryBackoff(getenv func(string) string) ([]time.Duration, error) {
	v := getenv("CLAWPEN_RETRY_BACKOFF")
	if v == "" {
		return []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}, nil
	}
	var out []time.Duration
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("CLAWPEN_RETRY_BACKOFF=%q: want durations separated by commas, e.g. 5s,30s,2m", v)
		}
		out = append(out, d)
	}
	return out, nil
}

// MinInterval reads CLAWPEN_MIN_INTERVAL, the shortest repeat a task may
// have (default 1m; tests lower it).
func MinInterval(getenv func(string) string) (time.Duration, error) {
	v := getenv("CLAWPEN_MIN_INTERVAL")
	if v == "" {
		return time.Minute, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("CLAWPEN_MIN_INTERVAL=%q: want a Go duration of at least 1s", v)
	}
	return d, nil
}

// Serve runs the host until ctx is done.
func Serve(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger) error {
	if err := cfg.RequireServe(); err != nil {
		return err
	}
	backoff, err := RetryBackoff(getenv)
	if err != nil {
		return err
	}
	if cfg.DebugAddr != "" {
		// Its own context, so an early error return also stops it.
		dctx, stopDebug := context.WithCancel(ctx)
		waitDebug, err := startDebug(dctx, cfg.DebugAddr, log)
		if err != nil {
			stopDebug()
			return err
		}
		defer waitDebug()
		defer stopDebug()
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	// Sockets of invocations that a crash left behind; their sandboxes died with us.
	// (OpenStore made the directory.)
	stale, err := os.ReadDir(runner.SocketsDir(cfg.DataDir))
	if err != nil {
		return fmt.Errorf("list stale sockets: %w", err)
	}
	for _, e := range stale {
		if err := os.RemoveAll(filepath.Join(runner.SocketsDir(cfg.DataDir), e.Name())); err != nil {
			return fmt.Errorf("remove stale sockets: %w", err)
		}
	}

	mountPolicy := NewMountPolicy(cfg, log)
	_, _ = mountPolicy.Current() // load now so a malformed file is reported at start

	backend, uid, gid, closeBackend := Backend(ctx, cfg, getenv, log)
	defer closeBackend()
	if os.Geteuid() == 0 {
		// Every run releases its pins; drop the host's pin directory too.
		defer func() { _ = pin.Clean(PinDir(cfg)); _ = os.Remove(PinDir(cfg)) }()
	}
	if d, ok := backend.(*docker.Backend); ok {
		// Containers do not die with the host; remove what a crash left.
		n, err := d.RemoveOrphans(ctx)
		if err != nil {
			return fmt.Errorf("remove orphaned sandbox containers: %w", err)
		}
		if n > 0 {
			log.Info("removed orphaned sandbox containers", "count", n)
		}
	}
	if u, ok := backend.(unavailable); ok {
		log.Error("agents will not run", "reason", u.err)
	} else {
		log.Info("sandbox ready", "backend", backend.Name(), "uid", uid, "gid", gid)
	}

	tg, err := telegram.New(ctx, telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramAPIURL, Logger: log})
	if err != nil {
		return fmt.Errorf("connect to Telegram: %w", err)
	}

	limits := sandbox.DefaultLimits
	limits.Timeout = cfg.AgentTimeout
	run := runner.New(runner.Config{
		GroupsDir: cfg.GroupsDir, DataDir: cfg.DataDir, RunAsUID: uid, RunAsGID: gid,
		AssistantName: cfg.AssistantName, Provider: cfg.Provider(), Model: cfg.Model,
		Env: cfg.SandboxEnv(), Limits: limits, Logger: log,
		Mounts: func(ctx context.Context, g domain.Group) []sandbox.Mount {
			ms, refused := mountPolicy.Resolve(g)
			for _, r := range refused {
				log.Warn("extra mount refused", "group", g.Folder, "rule", r.Rule, "path", r.Path, "reason", r.Reason)
				_ = st.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: g.Folder, Operation: "mount", Decision: "deny", Reason: r.Reason})
			}
			return ms
		},
		Upstreams: hostsock.Config{
			Anthropic: hostsock.Upstream{BaseURL: cfg.AnthropicBaseURL, APIKey: cfg.AnthropicKey},
			OpenAI:    hostsock.Upstream{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIKey},
		},
	}, backend)

	minInterval, err := MinInterval(getenv)
	if err != nil {
		return err
	}
	defaultPolicy, err := policy.Parse([]byte(getenv("CLAWPEN_SENDER_POLICY")), policy.Default)
	if err != nil {
		return fmt.Errorf("CLAWPEN_SENDER_POLICY: %w", err)
	}
	var (
		q     *queue.Queue
		sched *scheduler.Scheduler
		rt    *router.Router
	)
	ipcHandler := ipc.New(ipc.Config{
		Store: st, GroupsDir: cfg.GroupsDir, Loc: cfg.TZ, MinInterval: minInterval, Logger: log,
		WakeDelivery: func() { rt.WakeDelivery() }, WakeScheduler: func() { sched.Wake() },
		CheckMounts: mountPolicy.CheckRequests,
	})
	run.SetIPC(ipcHandler.Handle)
	rt, err = router.New(ctx, router.Config{
		Store: st, Messenger: tg, Agents: run,
		Kick:        func(g string) { q.Kick(g) },
		MinInterval: minInterval, WakeScheduler: func() { sched.Wake() }, DefaultPolicy: defaultPolicy,
		OwnerID: cfg.OwnerID, AssistantName: cfg.AssistantName, BotUsername: tg.Username(),
		GroupsDir: cfg.GroupsDir, TZ: cfg.TZ, Logger: log,
		Status: func(ctx context.Context) string {
			s := q.Stats()
			return fmt.Sprintf("Sandbox: %s, %d running (max %d).\nGroups running: %s\nWaiting: %v\n%s\n",
				run.Backend(), run.Running(), cfg.MaxConcurrent, strings.Join(s.Running, ", "), s.Waiting, mountPolicy.Status())
		},
	})
	if err != nil {
		return err
	}
	q = queue.New(ctx, queue.Config{MaxConcurrent: cfg.MaxConcurrent, Pending: rt.Pending, GiveUp: rt.GiveUp, Backoff: backoff, Logger: log,
		Permanent: func(err error) bool { return errors.Is(err, runner.ErrNoSandbox) }})
	sched = scheduler.New(scheduler.Config{
		Store: st, Loc: cfg.TZ, MinInterval: minInterval, Logger: log,
		Dispatch: func(ctx context.Context, t domain.Task) {
			q.Add(t.Group, func(ctx context.Context) error { return rt.RunTask(ctx, t) })
		},
	})

	var cmds []telegram.Command
	for _, c := range router.Commands {
		cmds = append(cmds, telegram.Command{Name: c.Name, Description: c.Description})
	}
	if err := tg.SetCommands(ctx, cmds); err != nil {
		log.Warn("register commands with Telegram", "err", err)
	}
	if code := rt.PairingCode(); code != "" {
		fmt.Fprintf(os.Stdout, "No owner yet. Send this to @%s in a private chat to become the owner:\n\n    /pair %s\n\n", tg.Username(), code)
		log.Info("waiting for pairing", "bot", tg.Username())
	}

	// Everything that writes to the store finishes before it is closed.
	var background sync.WaitGroup
	defer background.Wait()
	background.Go(func() { rt.Deliver(ctx) })
	background.Go(func() {
		if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("scheduler stopped", "err", err)
		}
	})
	if err := rt.RecoverPending(ctx); err != nil {
		return err
	}

	offset := int64(0)
	if v, ok, err := st.State(ctx, offsetKey); err != nil {
		return fmt.Errorf("read update offset: %w", err)
	} else if ok {
		offset, _ = strconv.ParseInt(v, 10, 64)
	}
	log.Info("clawpen serving", "bot", tg.Username(), "sandbox", backend.Name(), "offset", offset)
	err = tg.Poll(ctx, offset,
		func(ctx context.Context, u telegram.Update) error {
			if u.Message == nil {
				return nil
			}
			return rt.Handle(ctx, Inbound(u.Message))
		},
		func(ctx context.Context, next int64) error {
			// The update was handled; persist that even during shutdown, or
			// a restart would offer it again.
			return st.SetState(context.WithoutCancel(ctx), offsetKey, strconv.FormatInt(next, 10))
		})
	q.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Inbound converts a Telegram message for the router.
func Inbound(m *telegram.Incoming) router.Inbound {
	return router.Inbound{
		ChatID: m.ChatID, ChatType: m.ChatType, ChatTitle: m.ChatTitle, MessageID: m.MessageID,
		ThreadID: topic(m), SenderID: m.SenderID, SenderName: m.SenderName, SenderIsBot: m.SenderIsBot,
		Text: m.Text, Time: m.Date, MentionsBot: m.MentionsBot, ReplyToBot: m.ReplyToBot,
		MigrateToChatID: m.MigrateToChatID, MigrateFromChatID: m.MigrateFromChatID,
	}
}

// topic is the forum topic to answer in. Outside forums Telegram also sets a
// thread id on replies, and sending to it fails, so only topics count.
func topic(m *telegram.Incoming) int {
	if m.IsTopicMessage {
		return m.ThreadID
	}
	return 0
}
