package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

const (
	defaultBashTimeout = 120 * time.Second
	maxBashTimeout     = 600 * time.Second
	// pipeGrace bounds the wait for output after the shell's process group is
	// gone (a process that left the group may still hold the pipe).
	pipeGrace = 2 * time.Second
)

// shell picks the configured shell, else bash, else sh.
func (a *runner) shell() string {
	if a.opts.Shell != "" {
		return a.opts.Shell
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

func (a *runner) bash(ctx context.Context, args bashArgs) (string, error) {
	if strings.TrimSpace(args.Command) == "" {
		return "", errors.New("bash: command is empty")
	}
	timeout := defaultBashTimeout
	if args.TimeoutS != nil {
		if *args.TimeoutS <= 0 {
			return "", errors.New("bash: timeout_s must be positive")
		}
		timeout = min(time.Duration(*args.TimeoutS*float64(time.Second)), maxBashTimeout)
	}

	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("bash: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(a.shell(), "-c", args.Command)
	cmd.Dir = a.opts.WorkspaceDir
	cmd.Stdout, cmd.Stderr = w, w // one pipe: output interleaves as the user would see it
	// Own process group, so a timeout kills everything the command started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return "", fmt.Errorf("bash: start %s: %w", a.shell(), err)
	}
	w.Close()
	pgid := cmd.Process.Pid

	out := &headTail{max: MaxToolResult - 512}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r) // ends at EOF or when r is closed
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var status string
	select {
	case err = <-waited:
	case <-timer.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-waited
		status = fmt.Sprintf("timed out after %s; the command's process group was killed", timeout)
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-waited
		status = "cancelled; the command's process group was killed"
	}
	// Background children would otherwise keep the pipe (and the sandbox) busy.
	killGroup(pgid)
	select {
	case <-copied:
	case <-time.After(pipeGrace):
		r.Close()
		<-copied
	}

	text := out.String()
	if text == "" {
		text = "(no output)"
	} else if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	code := 0
	var exitErr *exec.ExitError
	switch {
	case status != "":
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
		status = fmt.Sprintf("exit code %d", code)
		if code < 0 {
			status = "killed by " + exitErr.String()
		}
	case err != nil:
		return "", fmt.Errorf("bash: %w", err)
	default:
		status = "exit code 0"
	}
	text = strings.TrimSuffix(text, "\n") + "\n[" + status + "]"
	if status != "exit code 0" {
		return "", errors.New(text)
	}
	return text, nil
}

// headTail keeps the first and the last max/2 bytes written, counting the rest:
// for command output the end (errors, summaries) matters as much as the start.
type headTail struct {
	max   int
	head  []byte
	tail  []byte
	total int
}

func (h *headTail) Write(p []byte) (int, error) {
	h.total += len(p)
	half := h.max / 2
	rest := p
	if room := half - len(h.head); room > 0 {
		n := min(room, len(rest))
		h.head = append(h.head, rest[:n]...)
		rest = rest[n:]
	}
	h.tail = append(h.tail, rest...)
	if len(h.tail) > 2*half { // trim rarely, not on every write
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-half:]...)
	}
	return len(p), nil
}

func (h *headTail) String() string {
	half := h.max / 2
	tail := h.tail
	if len(tail) > half {
		tail = tail[len(tail)-half:]
	}
	omitted := h.total - len(h.head) - len(tail)
	if omitted <= 0 {
		return string(h.head) + string(tail)
	}
	return string(h.head) + fmt.Sprintf("\n[... %d bytes omitted ...]\n", omitted) + string(tail)
}

// groupGoneWait bounds how long a tool call waits for its process group to
// be gone after killing it.
const groupGoneWait = 3 * time.Second

// killGroup kills the command's process group and waits, briefly, until the
// last of it is reaped: until then its processes (a fork bomb's thousands)
// still count against the sandbox's process limit, and the next tool call
// could not fork. The kill is repeated for a child forked as it landed.
func killGroup(pgid int) {
	deadline := time.Now().Add(groupGoneWait)
	for {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
