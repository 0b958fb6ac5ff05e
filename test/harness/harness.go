// Package harness runs the real `clawpen serve` binary against the fake
// Telegram Bot API and the fake model provider, with real sandboxes (bwrap, or
// Docker with CLAWPEN_E2E_SANDBOX=docker) running the real clawpen-agent. It is
// shared by the end-to-end tests (test/e2e) and the escape suite (test/escape).
//
// A test package's TestMain calls Main (or Setup itself); tests then start
// hosts with New.
package harness

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
	"github.com/clawpen/clawpen/internal/store/pgtest"
)

// Identities and secrets used throughout. The secrets are planted where a
// sandbox must never see them; tests grep for them in what comes back.
const (
	OwnerID    = int64(4242)
	StrangerID = int64(6666)
	MemberID   = int64(7777)
	GroupChat  = int64(-100200300)
	APIKey     = "sk-ant-e2e-SECRET-never-in-sandbox"
	// TranscribeKey is the transcription server's key (Options.Transcribe).
	TranscribeKey = "sk-transcribe-e2e-SECRET-never-in-sandbox"
	BotToken      = "123456:e2e-TOKEN-never-in-sandbox"
	SecretSSH     = "PLANTED-SSH-PRIVATE-KEY"
	SecretAWS     = "PLANTED-AWS-CREDENTIAL"
	// AllowlistMarker is a blocked pattern written into every host's mount
	// allowlist, so a sandbox that reads the file shows it.
	AllowlistMarker = "PLANTED-ALLOWLIST"
	// HostKeyDesc names a "user" key planted in serve's session keyring,
	// SecretKeyring is its payload (see Host.KeyPlanted).
	HostKeyDesc   = "clawpen-e2e-host-key"
	SecretKeyring = "PLANTED-KEYRING-SECRET"
)

// Image is the real agent image (container/Dockerfile), built fresh from this
// tree's agent for the docker run, tagged with the agent binary's digest so
// that two checkouts testing on one machine do not overwrite each other's.
// Setup sets it before any test runs; it is only read afterwards.
var Image = "clawpen-agent:e2e"

// ErrSkip is returned by Setup when the Docker backend was asked for but no
// engine answers; the reason has been printed and the package should exit 0.
var ErrSkip = errors.New("harness: backend not available")

// binDir holds clawpen and clawpen-agent, built once per test binary by Setup;
// it is written before any test runs and only read afterwards.
var binDir string

// SandboxUser is the host user the hosts' sandboxes run and write as, by
// `clawpen serve`'s own rule (app.SandboxUser with the default name): the
// dedicated sandbox user when the tests run as root, -1 (the host's own
// user) otherwise.
func SandboxUser() (uid, gid int, err error) {
	return app.SandboxUser(config.DefaultSandboxUser)
}

// Backend is the sandbox the hosts use: bwrap, or docker with
// CLAWPEN_E2E_SANDBOX=docker (make test runs both where an engine exists),
// or gvisor with CLAWPEN_E2E_SANDBOX=gvisor (runsc, as root).
func Backend() string { return cmp.Or(os.Getenv("CLAWPEN_E2E_SANDBOX"), "bwrap") }

// Database is the database the hosts keep their state in: sqlite, or
// postgres with CLAWPEN_E2E_DATABASE=postgres, each host then on a database
// of its own on a server the test binary starts (pgtest; a machine without
// PostgreSQL skips the tests, saying so).
func Database() string { return cmp.Or(os.Getenv("CLAWPEN_E2E_DATABASE"), "sqlite") }

// BinDir is the directory Setup built clawpen and clawpen-agent into.
func BinDir() string { return binDir }

// Root is the project root (the directory holding go.mod).
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("harness: not inside the clawpen module")
	}
	return filepath.Dir(mod), nil
}

// tmpPrefix names this test binary's host directories; Docker sandboxes carry
// the data dir as their instance label, so leftovers are found by it. The pid
// keeps two packages running at once from seeing each other's containers.
func tmpPrefix() string { return fmt.Sprintf("clawpen-e2e-%d-", os.Getpid()) }

// Setup builds the binaries once, and the agent image when the backend is
// docker. It returns ErrSkip (after printing the reason) when docker was asked
// for but no engine answers. cleanup removes the binaries.
func Setup() (cleanup func(), err error) {
	cleanup = func() {}
	if os.Geteuid() == 0 {
		// The hosts run sandboxes as the dedicated sandbox user, by serve's
		// own rule; without it nothing would run (make deps creates it).
		if _, _, err := SandboxUser(); err != nil {
			return cleanup, fmt.Errorf("harness: %w", err)
		}
		// The sandbox user must reach the binaries.
		_ = os.Chmod(os.TempDir(), 0o1777)
	}
	root, err := Root()
	if err != nil {
		return cleanup, err
	}
	dir, err := os.MkdirTemp("", "clawpen-e2e-bin-")
	if err != nil {
		return cleanup, fmt.Errorf("harness: bin dir: %w", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	_ = os.Chmod(dir, 0o755)
	for _, b := range []struct{ out, pkg, cgo string }{
		{"clawpen", "./cmd/clawpen", "1"},
		{"clawpen-agent", "./cmd/clawpen-agent", "0"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return cleanup, fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
		}
	}
	binDir = dir
	if Backend() == "gvisor" {
		if _, err := exec.LookPath("runsc"); err != nil || os.Geteuid() != 0 {
			fmt.Println("SKIP: CLAWPEN_E2E_SANDBOX=gvisor needs runsc (apt-get install runsc) and root")
			return cleanup, ErrSkip
		}
	}
	if Backend() == "docker" {
		if err := exec.Command("docker", "info").Run(); err != nil {
			fmt.Println("SKIP: CLAWPEN_E2E_SANDBOX=docker but no Docker engine answers (docker info failed)")
			return cleanup, ErrSkip
		}
		agent := filepath.Join(dir, "clawpen-agent")
		digest, err := fileDigest(agent)
		if err != nil {
			return cleanup, err
		}
		// The pid too: test binaries of several packages run at once, and
		// each removes its own tag when it ends.
		Image = fmt.Sprintf("clawpen-agent:e2e-%s-%d", digest[:12], os.Getpid())
		err = docker.BuildImage(context.Background(), docker.ImageOptions{ProjectRoot: root, AgentBin: agent, Tag: Image, Out: io.Discard})
		if err != nil {
			return cleanup, fmt.Errorf("build the agent image: %w", err)
		}
		cleanup = func() {
			_ = exec.Command("docker", "image", "rm", Image).Run() // its layers stay cached for the next build
			os.RemoveAll(dir)
		}
	}
	return cleanup, nil
}

// Main is a whole TestMain: Setup, the tests, and on docker the check that no
// sandbox container was left behind. after, when set, runs after the tests
// with their exit code and returns the final one.
func Main(m *testing.M, after func(code int) int) int {
	cleanup, err := Setup()
	defer cleanup()
	if errors.Is(err, ErrSkip) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := CheckLeftovers(m.Run())
	pgtest.StopShared()
	if after != nil {
		code = after(code)
	}
	return code
}

// CheckLeftovers fails a passing run (returns 1) when Docker sandbox
// containers of this test binary's hosts are left behind.
func CheckLeftovers(code int) int {
	if code != 0 {
		return code
	}
	if Backend() == "gvisor" {
		if left := leftoverRunsc(); left != "" {
			fmt.Fprintln(os.Stderr, "gVisor sandboxes left behind:\n"+left)
			return 1
		}
		return code
	}
	if Backend() != "docker" {
		return code
	}
	if left := LeftoverContainers(); left != "" {
		fmt.Fprintln(os.Stderr, "sandbox containers left behind:\n"+left)
		return 1
	}
	return code
}

// LeftoverContainers lists sandbox containers of this test binary's hosts
// (their instance label is a data dir under one of its temp dirs).
func LeftoverContainers() string {
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=clawpen.instance",
		"--format", `{{.ID}} {{.Label "clawpen.instance"}} {{.Status}}`).Output()
	if err != nil {
		return "docker ps failed: " + err.Error()
	}
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, filepath.Join(os.TempDir(), tmpPrefix())) {
			left = append(left, line)
		}
	}
	return strings.Join(left, "\n")
}

// fileDigest is the hex SHA-256 of the file at path.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("harness: digest: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("harness: digest %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// leftoverRunsc lists runsc processes of this test binary's hosts (their
// state dir is under a data dir in one of its temp dirs).
func leftoverRunsc() string {
	var left []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("runsc")) {
			continue
		}
		if bytes.Contains(cmd, []byte(filepath.Join(os.TempDir(), tmpPrefix()))) {
			left = append(left, p.Name()+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return strings.Join(left, "\n")
}
