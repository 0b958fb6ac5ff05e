package gvisor

import (
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/creack/pty"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// stdio is how runsc's standard streams reach the host: pipes (the agent's
// job and events, or a command's pipes), or, for a command run by hand
// with a terminal (`clawpen run`), a pseudo-terminal made here whose slave
// is runsc's stdio. The spec then says terminal (bundle.go), and gVisor
// serves the command a terminal of its own over that host file: the
// ioctls it passes on to the host's pty are the termios, window size and
// process group ones, never TIOCSTI.
type stdio struct {
	stdin   io.Writer
	stdout  io.Reader
	stderr  io.Reader // nil under a terminal: it shares stdout
	closeIn func()
	// Under a terminal: the master, ours; the slave, runsc's stdio, closed
	// here once runsc holds it so that reading the master ends with the
	// sandbox.
	master, slave *os.File
}

// connect gives cmd its standard streams as st asks (nil: pipes for the job).
func connect(cmd *exec.Cmd, st *sandbox.Stdio) (*stdio, error) {
	if st == nil || !st.TTY {
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("stdout pipe: %w", err)
		}
		errR, err := cmd.StderrPipe()
		if err != nil {
			return nil, fmt.Errorf("stderr pipe: %w", err)
		}
		return &stdio{stdin: in, stdout: out, stderr: errR, closeIn: func() { _ = in.Close() }}, nil
	}
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	if st.Rows > 0 && st.Cols > 0 {
		if err := pty.Setsize(master, &pty.Winsize{Rows: st.Rows, Cols: st.Cols}); err != nil {
			_ = master.Close()
			_ = slave.Close()
			return nil, fmt.Errorf("size the pseudo-terminal: %w", err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// The owner's end of input needs nothing: a terminal sends its own ^D.
	return &stdio{stdin: master, stdout: master, closeIn: func() {}, master: master, slave: slave}, nil
}

// started drops the host's copy of the slave: runsc has its own.
func (s *stdio) started() {
	if s.slave != nil {
		_ = s.slave.Close()
		s.slave = nil
	}
}

func (s *stdio) closeStdin() { s.closeIn() }

func (s *stdio) close() {
	s.started()
	if s.master != nil {
		_ = s.master.Close()
	}
}

// resizing passes st's new sizes to the terminal until stop is closed.
func (s *stdio) resizing(st *sandbox.Stdio, stop <-chan struct{}) {
	if st == nil || st.Resize == nil || s.master == nil {
		return
	}
	go func() {
		for {
			select {
			case sz := <-st.Resize:
				_ = pty.Setsize(s.master, &pty.Winsize{Rows: sz.Rows, Cols: sz.Cols})
			case <-stop:
				return
			}
		}
	}()
}
