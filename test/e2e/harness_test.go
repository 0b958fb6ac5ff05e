// Package e2e runs the real `clawpen serve` binary against the fake Telegram
// Bot API and the fake model provider, with real bubblewrap sandboxes running
// the real clawpen-agent.
package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/image"
	"github.com/clawpen/clawpen/test/fakellm"
	"github.com/clawpen/clawpen/test/faketg"
)

// Identities used throughout.
const (
	ownerID    = int64(4242)
	strangerID = int64(6666)
	memberID   = int64(7777)
	apiKey     = "sk-ant-e2e-SECRET-never-in-sandbox"
	botToken   = "123456:e2e-TOKEN-never-in-sandbox"
	secretSSH  = "PLANTED-SSH-PRIVATE-KEY"
)

var (
	binDir string // holds clawpen and clawpen-agent, built once
	// backend is the sandbox the hosts use: bwrap, or docker with
	// CLAWPEN_E2E_SANDBOX=docker (make test runs both where an engine exists).
	backend = cmp.Or(os.Getenv("CLAWPEN_E2E_SANDBOX"), "bwrap")
)

// e2eImage is the real agent image (container/Dockerfile), built fresh from
// this tree's agent for the docker run.
const e2eImage = "clawpen-agent:e2e"

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		// Sandboxes run as uid 1000; it must reach the binaries.
		_ = os.Chmod(os.TempDir(), 0o1777)
	}
	dir, err := os.MkdirTemp("", "clawpen-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, b := range []struct{ out, pkg, cgo string }{
		{"clawpen", "./cmd/clawpen", "1"},
		{"clawpen-agent", "./cmd/clawpen-agent", "0"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	binDir = dir
	if backend == "docker" {
		if err := exec.Command("docker", "info").Run(); err != nil {
			fmt.Println("SKIP: CLAWPEN_E2E_SANDBOX=docker but no Docker engine answers (docker info failed)")
			return 0
		}
		ctx := context.Background()
		if err := image.Build(ctx, image.Options{ProjectRoot: root, AgentBin: filepath.Join(dir, "clawpen-agent"), Tag: e2eImage, Out: io.Discard}); err != nil {
			fmt.Fprintln(os.Stderr, "build the agent image:", err)
			return 1
		}
	}
	code := m.Run()
	if backend == "docker" && code == 0 {
		if left := leftoverContainers(); left != "" {
			fmt.Fprintln(os.Stderr, "sandbox containers left behind:\n"+left)
			return 1
		}
	}
	return code
}

// leftoverContainers lists sandbox containers of this run's hosts (their
// instance label is a data dir under an e2e temp dir).
func leftoverContainers() string {
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=clawpen.instance",
		"--format", `{{.ID}} {{.Label "clawpen.instance"}} {{.Status}}`).Output()
	if err != nil {
		return "docker ps failed: " + err.Error()
	}
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, filepath.Join(os.TempDir(), "clawpen-e2e-")) {
			left = append(left, line)
		}
	}
	return strings.Join(left, "\n")
}

// host is one running `clawpen serve` with its fakes and directories.
type host struct {
	t      *testing.T
	tg     *faketg.Server
	llm    *fakellm.Server
	dir    string // working dir: data/, groups/, home/
	env    []string
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lineLog
}

type options struct {
	owner bool              // set CLAWPEN_OWNER_ID (else pairing)
	extra map[string]string // more environment
}

func newHost(t *testing.T, o options) *host {
	t.Helper()
	dir, err := os.MkdirTemp("", "clawpen-e2e-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })

	home := filepath.Join(dir, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte(secretSSH), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".config", "clawpen"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".config", "clawpen", "mount-allowlist.json"),
		[]byte(`{"allowedRoots":[],"blockedPatterns":["PLANTED-ALLOWLIST"],"nonMainReadOnly":true}`), 0o600))

	tg := faketg.New()
	t.Cleanup(tg.Close)
	llm := fakellm.New()
	llm.SetRequiredKey(apiKey)
	t.Cleanup(llm.Close)

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TELEGRAM_BOT_TOKEN=" + botToken,
		"TELEGRAM_API_URL=" + tg.URL(),
		"ANTHROPIC_API_KEY=" + apiKey,
		"ANTHROPIC_BASE_URL=" + llm.URL(),
		"CLAWPEN_MODEL=claude-test",
		"CLAWPEN_SANDBOX=" + backend,
		"CLAWPEN_AGENT_IMAGE=" + e2eImage,
		"CLAWPEN_AGENT_BIN=" + filepath.Join(binDir, "clawpen-agent"),
		"CLAWPEN_AGENT_TIMEOUT=60s",
		"CLAWPEN_RETRY_BACKOFF=200ms,400ms",
		"CLAWPEN_DEBUG=1",
	}
	if o.owner {
		env = append(env, fmt.Sprintf("CLAWPEN_OWNER_ID=%d", ownerID))
	}
	for k, v := range o.extra {
		env = append(env, k+"="+v)
	}
	h := &host{t: t, tg: tg, llm: llm, dir: dir, env: env}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *host) start() {
	h.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "clawpen"), "serve")
	cmd.Dir = h.dir
	cmd.Env = h.env
	h.stdout, h.stderr = newLineLog(), newLineLog()
	cmd.Stdout, cmd.Stderr = h.stdout, h.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(h.t, cmd.Start())
	h.cmd = cmd
	h.waitLog("clawpen serving")
}

// stop ends the host gracefully (SIGTERM) and waits.
func (h *host) stop() {
	if h.cmd == nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	if h.t.Failed() {
		h.t.Logf("host log:\n%s", h.stderr.String())
	}
	h.cmd = nil
}

// crash kills the host with SIGKILL, as a power cut would.
func (h *host) crash() {
	require.NoError(h.t, h.cmd.Process.Signal(syscall.SIGKILL))
	_ = h.cmd.Wait()
	h.cmd = nil
}

func (h *host) waitLog(substr string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !h.stderr.wait(ctx, substr) {
		h.t.Fatalf("host never logged %q; log:\n%s", substr, h.stderr.String())
	}
}

// say sends a message as user from in chat; private chats have chat id = user id.
func (h *host) say(chatID int64, chatType, title string, from int64, text string, opts ...faketg.MsgOpt) {
	h.t.Helper()
	h.tg.PushMessage(chatID, chatType, title, faketg.User{ID: from, FirstName: fmt.Sprintf("user%d", from)}, text, opts...)
}

func (h *host) ownerSays(text string) { h.say(ownerID, "private", "", ownerID, text) }

// replies waits until chat has at least n messages and returns their texts, HTML-unescaped.
func (h *host) replies(chatID int64, n int) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := h.tg.WaitSent(ctx, chatID, n)
	if err != nil {
		h.t.Fatalf("waiting for %d messages to chat %d: %v (got %d)\nhost log:\n%s", n, chatID, err, len(h.tg.SentTo(chatID)), h.stderr.String())
	}
	return texts(sent)
}

func texts(sent []faketg.SentMessage) []string {
	var out []string
	for _, s := range sent {
		out = append(out, plain(s.Text))
	}
	return out
}

var tagRE = regexp.MustCompile(`</?(b|i|u|s|code|pre|a|blockquote)( [^>]*)?>`)

// plain turns Telegram HTML back into the text a person reads.
func plain(s string) string { return html.UnescapeString(tagRE.ReplaceAllString(s, "")) }

// lineLog collects a process's output and lets tests wait for a line.
type lineLog struct {
	mu   sync.Mutex
	buf  strings.Builder
	cond chan struct{}
}

func newLineLog() *lineLog { return &lineLog{cond: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	close(l.cond)
	l.cond = make(chan struct{})
	l.mu.Unlock()
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lineLog) wait(ctx context.Context, substr string) bool {
	for {
		l.mu.Lock()
		has, ch := strings.Contains(l.buf.String(), substr), l.cond
		l.mu.Unlock()
		if has {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// grepFiles reports which files under root contain needle.
func grepFiles(t *testing.T, root string, needle []byte) []string {
	t.Helper()
	var hits []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		data, _ := io.ReadAll(bufio.NewReader(f))
		if strings.Contains(string(data), string(needle)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// promptOf is the newest user text of a model request: the job's prompt.
func promptOf(r fakellm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && m.Text() != "" {
			return m.Text()
		}
	}
	return ""
}

// ctxT is a context bounded for one wait in a test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
