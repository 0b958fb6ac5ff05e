package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func runCommand() *command {
	return &command{name: "run", args: "<folder> <command> [args...]", min: 2, max: -1, rawAfter: 1,
		summary: "run a command in a group's sandbox, as its agent would get it",
		detail: "Runs the command (a shell, another agent) in the group's sandbox: its view, profile, limits,\n" +
			"egress, and the host socket at /run/clawpen/host.sock (model proxy, IPC, the group's tools over\n" +
			"MCP at POST /mcp). With a terminal on stdin the command gets a pseudo-terminal, else pipes.\n" +
			"Everything after the folder is the command, flags included (a \"--\" before it is dropped).\n" +
			"Exits with the command's exit code; 1 when it could not run (unknown group, unusable profile,\n" +
			"no sandbox). Audited as operation run. Does not need serve; both may run sandboxes for the\n" +
			"same group at once.",
		flags: noFlags(runCmd)}
}

// exitStatus is a command's own exit code, passed through as clawpen's.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func runCmd(ctx context.Context, s *session, args []string) error {
	folder, argv := args[0], args[1:]
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	audit := func(decision, reason string) {
		e := domain.AuditEntry{Time: time.Now(), Group: folder, Operation: "run", Target: argv[0], Decision: decision, Reason: reason}
		if err := st.Audit(ctx, e); err != nil {
			s.log.Error("audit", "err", err)
		}
	}
	refuse := func(err error) error {
		audit("deny", err.Error())
		return err
	}
	g, err := groupByFolder(ctx, st, folder)
	if err != nil {
		return refuse(err)
	}
	if _, err := config.ResolveProfile(s.cfg.Profiles, g.ProfileName()); err != nil {
		return refuse(fmt.Errorf("group %q cannot run: its profile: %w", folder, err))
	}
	operations, err := s.ops(ctx)
	if err != nil {
		return err
	}
	sb, uid, gid, closeSB := app.RunBackend(ctx, s.cfg, s.log)
	defer closeSB()
	if why := app.Unavailable(sb); why != nil {
		return refuse(fmt.Errorf("refusing to run unsandboxed: %w", why))
	}
	r, err := app.NewRunner(s.cfg, app.Parts{Store: st, Sandbox: sb, RunAsUID: uid, RunAsGID: gid,
		Mounts: app.MountPolicy(s.cfg, s.log)}, operations, s.log)
	if err != nil {
		return err
	}

	stdio, restore, err := s.stdio()
	if err != nil {
		return err
	}
	defer restore()
	audit("allow", "owner-started run, "+sb.Name()+" sandbox")
	ans, err := r.Exec(ctx, runner.Request{Group: g, Command: argv, Stdio: stdio})
	restore() // the error below goes to a sane terminal
	switch {
	case err != nil && ans.ExitCode <= 0: // refused, or no exit status to pass on
		return err
	case err != nil: // stopped at a limit: say so, and pass its status on
		fmt.Fprintf(s.stderr, "run: %v\n", err)
		return exitStatus(ans.ExitCode)
	case ans.ExitCode < 0:
		return errors.New("the command ended without an exit status")
	case ans.ExitCode != 0:
		return exitStatus(ans.ExitCode)
	}
	return nil
}

// stdio is the command's standard streams: the owner's terminal, put in raw
// mode so that every key reaches the sandbox's terminal, or plain pipes.
// restore gives the terminal back as it was; it may be called twice.
func (s *session) stdio() (st *sandbox.Stdio, restore func(), err error) {
	st = &sandbox.Stdio{In: s.stdin, Out: s.stdout, Err: s.stderr}
	restore = func() {}
	in, ok := s.stdin.(*os.File)
	if !ok {
		return st, restore, nil
	}
	fd := int(in.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return st, restore, nil // not a terminal
	}
	st.TTY = true
	if size, err := pty.GetsizeFull(in); err == nil {
		st.Rows, st.Cols = size.Rows, size.Cols
	}
	raw := *old
	// cfmakeraw(3)
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, nil, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	// The terminal's new sizes follow it into the sandbox's.
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unix.SIGWINCH)
	resize := make(chan sandbox.WinSize, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if size, err := pty.GetsizeFull(in); err == nil {
					select {
					case resize <- sandbox.WinSize{Rows: size.Rows, Cols: size.Cols}:
					case <-stop:
						return
					}
				}
			case <-stop:
				return
			}
		}
	}()
	st.Resize = resize
	done := false
	return st, func() {
		if !done {
			done = true
			signal.Stop(winch)
			close(stop)
			_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
		}
	}, nil
}
