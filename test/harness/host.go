package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/store/pgtest"
)

// Wait bounds every wait for the host (an answer, a log line).
const Wait = 60 * time.Second

// Host is one running `clawpen serve` with its fakes and directories.
type Host struct {
	TG   *faketg.Server
	LLM  *fakellm.Server
	Dir  string // working dir: data/, groups/, home/
	Home string // the host's $HOME (Dir/home) with the planted secrets
	// Outside is a temp dir beside Dir, outside the project, holding the
	// AllowedRoots (a mount may not come from inside the project).
	Outside string
	Env     []string // the host's whole environment
	// DatabaseURL is the PostgreSQL database the host keeps its state in
	// (CLAWPEN_DATABASE_URL); "" for SQLite in its data dir.
	DatabaseURL string
	Stdout      *LineLog // of the current run of serve
	Stderr      *LineLog
	// KeyPlanted: serve was started in a session keyring of its own holding
	// the key HostKeyDesc, as a host started from a login session holds
	// keys. False when this machine refuses keyctl to the tests.
	KeyPlanted bool

	t     testing.TB
	proc  *proc  // shared by the views For returns
	ready string // what Start waits for serve to log
}

type proc struct{ cmd *exec.Cmd }

// AllowedRoot is one allowedRoots entry of the host's mount allowlist; Path
// is relative to the host's Outside dir.
type AllowedRoot struct {
	Path      string
	ReadWrite bool
}

// Options shape a host.
type Options struct {
	Owner bool              // set CLAWPEN_OWNER_ID (else pairing)
	Extra map[string]string // more environment; wins over the defaults
	// AllowedRoots go into the mount allowlist (none by default); the
	// directories are created.
	AllowedRoots []AllowedRoot
	// KeylessOpenAI configures only an OpenAI-compatible server without a
	// key (as a local Ollama or llama.cpp is), and no model name.
	KeylessOpenAI bool
	// Profiles, when set, is the content of the host's profiles file
	// (the default CLAWPEN_PROFILES, under the host's $HOME).
	Profiles string
	// Postgres keeps the host's state in a PostgreSQL database of its own,
	// whatever CLAWPEN_E2E_DATABASE says.
	Postgres bool
	// Share makes a second host of Share's: the same fakes and the same
	// PostgreSQL database, its own directories. It is started while Share
	// serves, so it stands by: New returns once it says so.
	Share *Host
	// Transcribe: voice notes are transcribed by the fake model's
	// transcription endpoint, with TranscribeKey.
	Transcribe bool
	// AlsoOpenAI points the OpenAI-compatible proxy at the fake too (with
	// the same key), beside Anthropic.
	AlsoOpenAI bool
}

// New makes a host's directories, plants the secrets a sandbox must never
// see in its $HOME (~/.ssh/id_rsa, ~/.aws/credentials, the mount allowlist),
// starts the fakes and `clawpen serve`, and stops it all when t ends.
func New(t testing.TB, o Options) *Host {
	t.Helper()
	require.NotEmpty(t, binDir, "harness.Setup did not run (call it from TestMain)")
	dir, err := os.MkdirTemp("", tmpPrefix())
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })

	home := filepath.Join(dir, "home")
	plant := func(rel, content string) {
		p := filepath.Join(home, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	plant(".ssh/id_rsa", SecretSSH)
	plant(".aws/credentials", "[default]\naws_secret_access_key = "+SecretAWS+"\n")
	outside, err := os.MkdirTemp("", tmpPrefix()+"outside-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(outside, 0o755))
	t.Cleanup(func() { os.RemoveAll(outside) })
	roots := []map[string]any{}
	for _, r := range o.AllowedRoots {
		p := filepath.Join(outside, r.Path)
		require.NoError(t, os.MkdirAll(p, 0o755))
		roots = append(roots, map[string]any{"path": p, "allowReadWrite": r.ReadWrite})
	}
	allow, err := json.Marshal(map[string]any{"allowedRoots": roots, "blockedPatterns": []string{AllowlistMarker}, "nonMainReadOnly": true})
	require.NoError(t, err)
	plant(".config/clawpen/mount-allowlist.json", string(allow))
	if o.Profiles != "" {
		plant(ProfilesRel, o.Profiles)
	}

	var (
		tg    *faketg.Server
		llm   *fakellm.Server
		dbURL string
	)
	if o.Share != nil {
		require.NotEmpty(t, o.Share.DatabaseURL, "a shared host serves on PostgreSQL")
		tg, llm, dbURL = o.Share.TG, o.Share.LLM, o.Share.DatabaseURL
	} else {
		tg = faketg.New()
		t.Cleanup(tg.Close)
		llm = fakellm.New()
		llm.SetRequiredKey(APIKey)
		t.Cleanup(llm.Close)
		if o.Postgres || Database() == "postgres" {
			dbURL = pgtest.NewDatabase(t)
		}
	}
	provider := []string{"ANTHROPIC_API_KEY=" + APIKey, "ANTHROPIC_BASE_URL=" + llm.URL(), "CLAWPEN_MODEL=claude-test"}
	if o.KeylessOpenAI {
		llm.SetRequiredKey("")
		provider = []string{"OPENAI_BASE_URL=" + llm.URL() + "/v1"}
	}
	if o.AlsoOpenAI {
		provider = append(provider, "OPENAI_BASE_URL="+llm.URL()+"/v1", "OPENAI_API_KEY="+APIKey)
	}

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TELEGRAM_BOT_TOKEN=" + BotToken,
		"TELEGRAM_API_URL=" + tg.URL(),
		"CLAWPEN_SANDBOX=" + Backend(),
		"CLAWPEN_AGENT_IMAGE=" + Image,
		"CLAWPEN_AGENT_BIN=" + filepath.Join(binDir, "clawpen-agent"),
		"CLAWPEN_AGENT_TIMEOUT=60s",
		"CLAWPEN_RETRY_BACKOFF=200ms,400ms",
		"CLAWPEN_DEBUG=1",
	}
	env = append(env, provider...)
	if o.Transcribe {
		llm.SetTranscribeKey(TranscribeKey)
		env = append(env, "CLAWPEN_TRANSCRIBE=openai", "CLAWPEN_TRANSCRIBE_URL="+llm.URL(), "CLAWPEN_TRANSCRIBE_KEY="+TranscribeKey)
	}
	if o.Owner {
		env = append(env, fmt.Sprintf("CLAWPEN_OWNER_ID=%d", OwnerID))
	}
	if dbURL != "" {
		env = append(env, "CLAWPEN_DATABASE_URL="+dbURL)
	}
	for k, v := range o.Extra {
		env = append(env, k+"="+v) // exec keeps the last of duplicate keys
	}
	h := &Host{TG: tg, LLM: llm, Dir: dir, Home: home, Outside: outside, Env: env, DatabaseURL: dbURL,
		Stdout: NewLineLog(), Stderr: NewLineLog(), t: t, proc: &proc{}, ready: "clawpen serving"}
	if o.Share != nil {
		h.ready = "standing by"
	}
	h.Start()
	t.Cleanup(h.Stop)
	return h
}

// ProfilesRel is the host's profiles file (CLAWPEN_PROFILES' default)
// relative to its $HOME.
const ProfilesRel = ".config/clawpen/profiles.json"

// WriteProfiles replaces the host's profiles file; the next run reads it.
func (h *Host) WriteProfiles(t testing.TB, content string) {
	t.Helper()
	p := filepath.Join(h.Home, ProfilesRel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
}

// For is a view of the same host whose failures go to t (a subtest): a
// failing wait must stop the test that waits, not the one that made the host.
func (h *Host) For(t testing.TB) *Host {
	v := *h
	v.t = t
	return &v
}

// Start runs `clawpen serve` and waits until it serves (a Share host: until
// it stands by).
func (h *Host) Start() {
	h.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "clawpen"), "serve")
	cmd.Dir = h.Dir
	cmd.Env = h.Env
	h.Stdout.Reset()
	h.Stderr.Reset()
	cmd.Stdout, cmd.Stderr = h.Stdout, h.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	planted, err := startWithHostKey(cmd)
	require.NoError(h.t, err)
	h.KeyPlanted = planted
	h.proc.cmd = cmd
	h.WaitLog(h.ready)
}

// Stop ends the host gracefully (SIGTERM) and waits.
func (h *Host) Stop() {
	cmd := h.proc.cmd
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(done) }()
	select {
	case <-done:
		// A graceful stop is a clean exit: a crash on the way out (a
		// panic in a close) would otherwise pass unseen.
		if err != nil {
			h.t.Errorf("serve did not exit cleanly on SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		h.t.Errorf("serve did not stop within 20 s of SIGTERM")
	}
	if h.t.Failed() {
		h.t.Logf("host log:\n%s", h.Stderr.String())
	}
	h.proc.cmd = nil
}

// Crash kills the host with SIGKILL, as a power cut would.
func (h *Host) Crash() {
	require.NoError(h.t, h.proc.cmd.Process.Signal(syscall.SIGKILL))
	_ = h.proc.cmd.Wait()
	h.proc.cmd = nil
}

// WaitExit waits until serve exits on its own and returns how it ended.
func (h *Host) WaitExit() error {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.proc.cmd.Wait() }()
	select {
	case err := <-done:
		h.proc.cmd = nil
		return err
	case <-time.After(Wait):
		h.t.Fatalf("serve did not exit within %s; log:\n%s", Wait, h.Stderr.String())
		return nil
	}
}

// Running reports whether serve is still alive (not exited).
func (h *Host) Running() bool {
	cmd := h.proc.cmd
	return cmd != nil && cmd.ProcessState == nil && cmd.Process.Signal(syscall.Signal(0)) == nil
}

// PID is the serve process's id (0 when it is not running).
func (h *Host) PID() int {
	if cmd := h.proc.cmd; cmd != nil {
		return cmd.Process.Pid
	}
	return 0
}

// WaitLog waits until the host logged substr.
func (h *Host) WaitLog(substr string) { h.t.Helper(); h.WaitLogCount(substr, 1) }

// WaitLogCount waits until the host logged substr n times.
func (h *Host) WaitLogCount(substr string, n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !h.Stderr.WaitCount(ctx, substr, n) {
		h.t.Fatalf("host logged %q fewer than %d times; log:\n%s", substr, n, h.Stderr.String())
	}
}

// Say sends a message as user from in chat; private chats have chat id = user id.
func (h *Host) Say(chatID int64, chatType, title string, from int64, text string, opts ...faketg.MsgOpt) {
	h.t.Helper()
	h.TG.PushMessage(chatID, chatType, title, faketg.User{ID: from, FirstName: fmt.Sprintf("user%d", from)}, text, opts...)
}

// OwnerSays sends text in the owner's private chat.
func (h *Host) OwnerSays(text string) { h.Say(OwnerID, "private", "", OwnerID, text) }

// Replies waits until chat has at least n messages and returns their texts, HTML-unescaped.
func (h *Host) Replies(chatID int64, n int) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	sent, err := h.TG.WaitSent(ctx, chatID, n)
	if err != nil {
		h.t.Fatalf("waiting for %d messages to chat %d: %v (got %d)\nhost log:\n%s", n, chatID, err, len(h.TG.SentTo(chatID)), h.Stderr.String())
	}
	return Texts(sent)
}

// WaitFor waits until some message to chat contains substr.
func (h *Host) WaitFor(chat int64, substr string) {
	h.t.Helper()
	h.WaitForWithin(chat, substr, Wait)
}

// WaitForWithin is WaitFor with its own bound.
func (h *Host) WaitForWithin(chat int64, substr string, d time.Duration) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		for _, s := range Texts(h.TG.SentTo(chat)) {
			if strings.Contains(s, substr) {
				return true
			}
		}
		return false
	}, d, 20*time.Millisecond, "no message containing %q; host log:\n%s", substr, h.Stderr.String())
}

// RegisterGroup registers GroupChat as folder through the owner's /register
// command and checks the confirmation.
func (h *Host) RegisterGroup(t testing.TB, folder string) {
	t.Helper()
	n := len(h.TG.SentTo(OwnerID))
	h.OwnerSays(fmt.Sprintf("/register %d %s Family Chat", GroupChat, folder))
	got := h.For(t).Replies(OwnerID, n+1)
	require.Contains(t, got[n], "groups/"+folder, "confirmation names the folder")
}

// CLI runs the clawpen CLI against the host's data, as an operator would,
// and requires it to succeed.
func (h *Host) CLI(args ...string) string {
	h.t.Helper()
	out, err := h.RunCLI(args...)
	require.NoError(h.t, err, "clawpen %v: %s", args, out)
	return out
}

// CLIFails runs the CLI expecting a failure and returns its output.
func (h *Host) CLIFails(args ...string) string {
	h.t.Helper()
	out, err := h.RunCLI(args...)
	require.Error(h.t, err, "clawpen %v should fail: %s", args, out)
	return out
}

// RunCLI runs the CLI and returns its combined output and error, whatever they are.
func (h *Host) RunCLI(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "clawpen"), args...)
	cmd.Dir = h.Dir
	cmd.Env = h.Env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Store opens the host's database, as the CLI would; the caller closes it.
func (h *Host) Store() *store.Store {
	h.t.Helper()
	var (
		st  *store.Store
		err error
	)
	if h.DatabaseURL != "" {
		st, err = store.OpenPostgres(context.Background(), h.DatabaseURL)
	} else {
		st, err = store.Open(context.Background(), filepath.Join(h.Dir, "data", "clawpen.db"))
	}
	require.NoError(h.t, err)
	return st
}

// Restore opens what `clawpen backup` wrote to dst as the operator would
// restore it: the SQLite copy, checked with PRAGMA integrity_check, as it
// is; a PostgreSQL dump restored with pg_restore into an empty database.
// The caller closes it.
func (h *Host) Restore(dst string) *store.Store {
	h.t.Helper()
	ctx := context.Background()
	if h.DatabaseURL == "" {
		require.NoError(h.t, store.IntegrityCheck(ctx, dst))
		st, err := store.Open(ctx, dst)
		require.NoError(h.t, err)
		return st
	}
	url := pgtest.NewDatabase(h.t)
	out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+url, dst).CombinedOutput()
	require.NoError(h.t, err, "pg_restore: %s", out)
	st, err := store.OpenPostgres(ctx, url)
	require.NoError(h.t, err)
	return st
}

// GrepStored reports where the host keeps needle: the files of its data
// dir that hold it and, on PostgreSQL, "database" when a dump of its
// database does.
func (h *Host) GrepStored(needle string) []string {
	h.t.Helper()
	hits := GrepFiles(h.t, filepath.Join(h.Dir, "data"), []byte(needle))
	if h.DatabaseURL != "" {
		dump, err := exec.Command("pg_dump", "--format=plain", "--dbname="+h.DatabaseURL).Output()
		require.NoError(h.t, err, "pg_dump of the host's database")
		if strings.Contains(string(dump), needle) {
			hits = append(hits, "database")
		}
	}
	return hits
}

// Tasks reads the tasks from the database directly.
func (h *Host) Tasks() []domain.Task {
	h.t.Helper()
	st := h.Store()
	defer st.Close()
	ts, err := st.ListTasks(context.Background(), "")
	require.NoError(h.t, err)
	return ts
}

// WaitDelivered waits until the outbox holds nothing: every answer Telegram
// accepted is marked sent. A kill before that resends what was accepted
// (at least once across that window), which a test of exactly-once command
// handling must not count.
func (h *Host) WaitDelivered() {
	h.t.Helper()
	st := h.Store()
	defer st.Close()
	deadline := time.Now().Add(Wait)
	for {
		rows, err := st.PendingOutbox(context.Background())
		require.NoError(h.t, err)
		if len(rows) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d outbox rows still undelivered after %s", len(rows), Wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Usage is the model tokens folder used, over all days.
func (h *Host) Usage(folder string) domain.Usage {
	h.t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(h.Dir, "data", "clawpen.db"))
	require.NoError(h.t, err)
	defer st.Close()
	days, err := st.UsageSince(context.Background(), "")
	require.NoError(h.t, err)
	total := domain.Usage{Group: folder}
	for _, u := range days {
		if u.Group == folder {
			total.Input, total.Output, total.Requests = total.Input+u.Input, total.Output+u.Output, total.Requests+u.Requests
		}
	}
	return total
}

// AuditLog is the audit log, one "group operation decision reason" line per entry.
func (h *Host) AuditLog() string {
	h.t.Helper()
	st := h.Store()
	defer st.Close()
	entries, err := st.AuditLog(context.Background(), 0)
	require.NoError(h.t, err)
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %s %s %s\n", e.Group, e.Operation, e.Decision, e.Reason)
	}
	return b.String()
}

// startWithHostKey starts cmd from a thread that joined a new session
// keyring and put the key HostKeyDesc in it, so serve and whatever it starts
// without a keyring of their own inherit it. planted is false when keyctl is
// refused here; cmd is then started plainly.
func startWithHostKey(cmd *exec.Cmd) (planted bool, err error) {
	type res struct {
		planted bool
		err     error
	}
	done := make(chan res, 1)
	go func() {
		// Never unlocked: the thread, with its keyring, ends with this
		// goroutine (serve has no Pdeathsig to fire).
		runtime.LockOSThread()
		// A NULL name: an anonymous keyring, joined by nobody else.
		_, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
		planted := false
		if e == 0 {
			_, err := unix.AddKey("user", HostKeyDesc, []byte(SecretKeyring), unix.KEY_SPEC_SESSION_KEYRING)
			planted = err == nil
		}
		done <- res{planted, cmd.Start()}
	}()
	r := <-done
	return r.planted, r.err
}
