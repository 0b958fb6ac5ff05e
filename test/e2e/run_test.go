package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// `clawpen run <folder> COMMAND` runs the command in the group's sandbox as
// its agent would get it, without serve's help: the group's view and
// nothing else (the planted key, main's folder and data/ are absent), the
// command's exit code as clawpen's, a shell under a pseudo-terminal driven
// from here, an MCP client listing the group's tools only, and every run
// and refusal in the audit log.
func TestRun(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Profiles: `{"profiles":{"toolful":{"tools":["forall"]}}}`})
	dir := filepath.Join(h.Home, ".config/clawpen/tools")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	writeToolFile(t, dir, "mainonly", "description: main only\ncommand: [/bin/echo, MAIN-ONLY]")
	writeToolFile(t, dir, "forall", "description: all, if the profile lists it\ngroups: all\ncommand: [/bin/echo, FOR-ALL]")
	h.RegisterGroup(t, "family")
	mainDir := filepath.Join(h.Dir, "groups", "main")
	require.NoError(t, os.MkdirAll(mainDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mainDir, "MAIN-ONLY-FILE"), []byte("main's"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.Dir, "groups", "family", "FAMILY-FILE"), []byte("FAMILY-CONTENT"), 0o644))

	// The view: the escape suite's read probes, through `clawpen run`.
	key := filepath.Join(h.Home, ".ssh/id_rsa")
	out := h.CLI("run", "family", "/bin/sh", "-c", strings.Join([]string{
		"cat /workspace/group/FAMILY-FILE; echo",
		"test -d /workspace/global && echo GLOBAL-THERE",
		"cat " + key + " 2>&1 || echo KEY-HOSTPATH-ABSENT",
		"cat ~/.ssh/id_rsa 2>&1 || echo KEY-HOME-ABSENT",
		// Listings by the shell's globs and test, not coreutils ls (runsc
		// 2022-12-19 refuses its statx); the search skips the host's
		// read-only OS dirs, the same binds on every backend, which gVisor's
		// gofer walks too slowly.
		"for f in " + mainDir + "/* /workspace/main/*; do test -e \"$f\" && echo \"$f\"; done",
		"find / \\( -path /usr -o -path /bin -o -path /sbin -o -path '/lib*' \\) -prune -o -name MAIN-ONLY-FILE -print 2>/dev/null; echo MAIN-SEARCHED",
		"test -e " + filepath.Join(h.Dir, "data") + " && for f in " + filepath.Join(h.Dir, "data") + "/*; do echo \"$f\"; done || echo DATA-ABSENT",
		"test -S /run/clawpen/host.sock && echo SOCKET-THERE",
		"echo HOME=$HOME PWD=$(pwd) ID=$(id -u)",
	}, "; "))
	t.Logf("family's view:\n%s", out)
	for _, want := range []string{"FAMILY-CONTENT", "GLOBAL-THERE", "KEY-HOSTPATH-ABSENT", "KEY-HOME-ABSENT",
		"MAIN-SEARCHED", "DATA-ABSENT", "SOCKET-THERE", "HOME=/home/agent PWD=/workspace/group ID=1000"} {
		assert.Contains(t, out, want)
	}
	for _, leak := range []string{harness.SecretSSH, "MAIN-ONLY-FILE", "clawpen.db"} {
		assert.NotContains(t, out, leak)
	}

	// The exit code comes back, also with flags in the command line.
	_, err := h.RunCLI("run", "family", "--", "/bin/sh", "-c", "exit 7")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 7, ee.ExitCode())

	// An interactive shell under a pseudo-terminal, driven from here.
	cmd := exec.Command(filepath.Join(harness.BinDir(), "clawpen"), "run", "family", "/bin/sh", "-i")
	cmd.Dir, cmd.Env = h.Dir, h.Env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 101})
	require.NoError(t, err)
	defer tty.Close()
	screen := harness.NewLineLog()
	go func() { _, _ = io.Copy(screen, tty) }()
	_, err = tty.WriteString("test -t 0 && echo TTY-$((6*7)) && stty size\n")
	require.NoError(t, err)
	ctx := harness.Ctx(t)
	require.True(t, screen.Wait(ctx, "TTY-42"), "the shell answered on its terminal:\n%s", screen)
	require.True(t, screen.Wait(ctx, "33 101"), "the terminal has the owner's size:\n%s", screen)
	// A resize of the owner's terminal reaches the sandbox's.
	require.NoError(t, pty.Setsize(tty, &pty.Winsize{Rows: 44, Cols: 120}))
	require.Eventually(t, func() bool {
		if _, err := tty.WriteString("stty size\n"); err != nil {
			return false
		}
		return screen.Wait(shortCtx(t, time.Second), "44 120")
	}, harness.Wait, 100*time.Millisecond, "the terminal's new size:\n%s", screen)
	_, err = tty.WriteString("exit 3\n")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(harness.Wait):
		_ = cmd.Process.Kill()
		t.Fatalf("the interactive run did not end:\n%s", screen)
	}
	require.True(t, errors.As(err, &ee), "exit: %v", err)
	assert.Equal(t, 3, ee.ExitCode(), "the shell's exit code")

	// An MCP client started by it lists the group's tools only.
	client := filepath.Join(h.Dir, "groups", "family", "mcpclient")
	build := exec.Command("go", "build", "-o", client, "./mcpclient")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mcpclient: %v\n%s", err, b)
	}
	require.NoError(t, os.Chmod(client, 0o755))
	fam := h.CLI("run", "family", "./mcpclient", "list")
	assert.NotContains(t, fam, "MCP-TOOL", "the default profile lists no tool")
	h.CLI("groups", "profile", "family", "toolful")
	fam = h.CLI("run", "family", "./mcpclient", "list")
	assert.Contains(t, fam, "MCP-TOOL forall")
	assert.NotContains(t, fam, "MCP-TOOL mainonly")
	require.NoError(t, os.Rename(client, filepath.Join(mainDir, "mcpclient")))
	mainTools := h.CLI("run", "main", "./mcpclient", "list")
	t.Logf("main's tools over MCP:\n%s", mainTools)
	assert.Contains(t, mainTools, "MCP-TOOL mainonly")
	assert.Contains(t, mainTools, "MCP-TOOL forall")
	called := h.CLI("run", "main", "./mcpclient", "call", "mainonly", "{}")
	assert.Contains(t, called, "MCP-RESULT error=false")
	assert.Contains(t, called, "MAIN-ONLY")

	// Refusals: an unknown folder, a profile that cannot be used.
	assert.Contains(t, h.CLIFails("run", "nosuch", "/bin/true"), `no group has the folder "nosuch"`)
	h.WriteProfiles(t, `{"profiles":`)
	assert.Contains(t, h.CLIFails("run", "family", "/bin/true"), "cannot run")

	// No sandbox backend: refused, never run unsandboxed.
	nosb := exec.Command(filepath.Join(harness.BinDir(), "clawpen"), "run", "main", "/bin/sh", "-c", "echo RAN-ANYWAY")
	nosb.Dir = h.Dir
	nosb.Env = append(append([]string{}, h.Env...), "CLAWPEN_SANDBOX=docker", "CLAWPEN_AGENT_IMAGE=clawpen-no-such-image:none")
	b, err := nosb.CombinedOutput()
	require.ErrorAs(t, err, &ee, "%s", b)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, string(b), "refusing to run unsandboxed")
	assert.NotContains(t, string(b), "RAN-ANYWAY")

	audit := h.AuditLog()
	assert.Contains(t, audit, "family run allow")
	assert.Contains(t, audit, "main run allow")
	assert.Contains(t, audit, "nosuch run deny")
	assert.Contains(t, audit, "family run deny")
	assert.Contains(t, audit, "main run deny refusing to run unsandboxed")
}

func shortCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(harness.Ctx(t), d)
	t.Cleanup(cancel)
	return ctx
}
