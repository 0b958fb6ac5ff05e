package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

const (
	// StderrTail is how much of a sandbox's stderr Result.Stderr keeps.
	StderrTail = 8 << 10
	// drainWait bounds how long Supervise waits for the sandbox's streams
	// to end once it has exited; it then closes them.
	drainWait = 10 * time.Second
)

// Process is one sandbox as its backend starts and stops it. Supervise
// calls Start once, then Ready once unless the run is already over, Wait
// once, and Finish once unless the sandbox ran nothing. Kill and Resize
// come from other goroutines.
type Process interface {
	// Start starts the sandbox, made ready to start by the backend.
	Start() error
	// Ready returns once every limit of the started sandbox is in force
	// (and watched): only then is it given its job or the owner's input.
	// An error fails the run; Supervise then kills the sandbox.
	Ready() error
	// Kill kills every process of the sandbox. Supervise calls it at most
	// once, and never once Wait has called ended.
	Kill()
	// Wait returns once every process of the sandbox is gone, with the
	// exit code of its command (128+signal when it was killed); a
	// runtime that may leave some behind when killed (runsc's sandbox
	// processes) has them killed, and its Run waits for them before it
	// returns. Wait calls ended as soon as the sandbox has exited and
	// before anything that would let a Kill reach another process
	// (reaping it). An error means the exit could not be learnt.
	Wait(ended func()) (int, error)
	// Resize gives the sandbox's terminal a new size.
	Resize(WinSize)
	// Finish reads what the kernel or the engine knows of the ended
	// sandbox into res (Limit), and returns an error when the runtime
	// never ran the command (it could not build the sandbox).
	Finish(res *Result) error
}

// Streams are the host's ends of a sandbox's standard streams.
type Streams struct {
	In      io.Writer
	CloseIn func() // the command reads EOF
	// Out is stdout, or stdout and stderr together under a terminal. Err
	// is stderr; nil when Out carries it.
	Out, Err io.Reader
	// Demux, when set, splits Out into stdout and stderr (the engine's
	// multiplexed stream).
	Demux func(stdout, stderr io.Writer, src io.Reader) (int64, error)
	// Close closes the host's ends: copies and writes in progress end.
	Close func()
}

// errEnded is why a sandbox's wait for its job ends when the sandbox does.
var errEnded = errors.New("the sandbox ended before its job")

// Supervise is the lifecycle every backend's Run shares. It starts p,
// copies its stdout to spec.Stdout (or Stdio.Out) capped at
// Limits.OutputBytes, keeps the tail of its stderr, gives it its job (or
// the owner's input) once it is Ready, kills it when the wall clock
// (Limits.Timeout, from the job on) runs out, the output cap is passed or
// ctx ends, and returns once every process of the sandbox is gone.
//
// An error means the sandbox ran nothing (it could not be set up, or it
// ended before its job, then wrapping ErrUnused) or ctx was cancelled
// (TimedOut is then set and the error wraps ctx.Err()); the command's own
// failure is a non-zero Result.ExitCode.
func Supervise(ctx context.Context, spec Spec, p Process, st Streams, log *slog.Logger) (Result, error) {
	var res Result
	defer st.Close()
	lim := spec.Limits.WithDefaults()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	clock := time.AfterFunc(lim.Timeout, func() { cancel(ErrTimeLimit) })
	clock.Stop()
	defer clock.Stop()

	start := time.Now()
	if err := p.Start(); err != nil {
		return res, err
	}
	// A kill before the start would find nothing to kill.
	k := &killer{kill: p.Kill}
	defer context.AfterFunc(runCtx, k.do)()
	log.Debug("sandbox started")

	outW, errW := spec.Stdout, io.Writer(nil)
	if spec.Stdio != nil {
		outW, errW = spec.Stdio.Out, spec.Stdio.Err
	}
	out := &CapWriter{W: outW, Limit: lim.OutputBytes, OnLimit: func() {
		log.Warn("sandbox output limit reached; killing", "limit", lim.OutputBytes)
		k.do()
	}}
	tail := &Tail{Max: StderrTail}
	var errOut io.Writer = tail
	if errW != nil {
		errOut = io.MultiWriter(tail, errW)
	}
	copied := st.copy(out, errOut)

	if s := spec.Stdio; s != nil && s.TTY && s.Resize != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case sz := <-s.Resize:
					p.Resize(sz)
				case <-stop:
					return
				}
			}
		}()
	}

	var readyErr error
	if runCtx.Err() == nil {
		if readyErr = p.Ready(); readyErr != nil {
			k.do()
		}
	}
	// decided is closed once the job is given or will never be; jobErr is
	// then set when it never will.
	decided := make(chan struct{})
	var jobErr error
	switch {
	case readyErr != nil || runCtx.Err() != nil:
		close(decided)
	case spec.Stdio != nil:
		close(decided)
		clock.Reset(lim.Timeout)
		// Not waited for: the owner's input may never end; the copy stops
		// at its first write once the streams are closed.
		go func() {
			_, _ = io.Copy(st.In, spec.Stdio.In)
			st.CloseIn()
		}()
	default:
		go func() {
			defer st.CloseIn()
			job, err := spec.WaitJob(runCtx)
			if err != nil {
				jobErr = err
				close(decided)
				cancel(err)
				return
			}
			clock.Reset(lim.Timeout)
			close(decided)
			if _, err := st.In.Write(job); err != nil {
				log.Debug("write the sandbox's job", "err", err)
			}
		}()
	}

	exit, waitErr := p.Wait(k.end)
	res.Duration = time.Since(start)
	res.ExitCode = exit
	res.TimedOut = runCtx.Err() != nil
	cancel(errEnded)
	<-decided
	select {
	case <-copied:
	case <-time.After(drainWait):
		log.Warn("sandbox output streams did not end after its exit; closing them")
		st.Close()
		<-copied
	}
	res.Stderr = tail.String()
	res.OutputTruncated = out.Truncated()
	if jobErr != nil {
		res.TimedOut = false
		return res, fmt.Errorf("sandbox for %s: %w", spec.Group, jobErr)
	}
	failed := p.Finish(&res)
	if res.Limit != "" {
		log.Warn("sandbox reached a cgroup limit", "limit", res.Limit, "memory", lim.MemoryBytes, "pids", lim.Pids)
	}
	log.Debug("sandbox finished", "exit", res.ExitCode, "timed_out", res.TimedOut,
		"truncated", res.OutputTruncated, "duration", res.Duration)

	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("sandbox run cancelled: %w", ctx.Err())
	case failed != nil:
		return res, failed
	case readyErr != nil:
		return res, readyErr
	case waitErr != nil:
		return res, waitErr
	}
	return res, nil
}

// copy copies the streams to out and errOut; the channel is closed once
// they have all ended.
func (st Streams) copy(out, errOut io.Writer) <-chan struct{} {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if st.Demux != nil {
			_, _ = st.Demux(out, errOut, st.Out)
			return
		}
		_, _ = io.Copy(out, st.Out)
	}()
	if st.Err != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(errOut, st.Err) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// killer runs a backend's Kill at most once, from whichever of the wall
// clock, the output cap, ctx or a failed Ready comes first, and never once
// the sandbox has ended: a kill in progress then finishes first.
type killer struct {
	mu   sync.Mutex
	done bool
	kill func()
}

func (k *killer) do() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.done {
		k.done = true
		k.kill()
	}
}

func (k *killer) end() {
	k.mu.Lock()
	k.done = true
	k.mu.Unlock()
}

// CmdStreams gives cmd, a runtime started on the host (bwrap, runsc), its
// standard streams as st asks: pipes (the agent's job and events, or a
// command's pipes), or a pseudo-terminal made here, whose slave is cmd's
// stdin, stdout and stderr, for a command run by hand with a terminal
// (`clawpen run`). started closes the host's copies of cmd's ends once cmd
// has started, so that the streams end with the sandbox's last process;
// resize sizes the terminal (nothing without one).
func CmdStreams(cmd *exec.Cmd, st *Stdio) (s Streams, started func(), resize func(WinSize), err error) {
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	if st == nil || !st.TTY {
		var f [6]*os.File // stdin, stdout, stderr: read end, write end
		for i := 0; i < len(f); i += 2 {
			if f[i], f[i+1], err = os.Pipe(); err != nil {
				closeAll(f[:]...)
				return Streams{}, nil, nil, fmt.Errorf("pipes for the sandbox's streams: %w", err)
			}
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = f[0], f[3], f[5]
		s = Streams{In: f[1], Out: f[2], Err: f[4], CloseIn: func() { _ = f[1].Close() }, Close: func() { closeAll(f[:]...) }}
		return s, func() { closeAll(f[0], f[3], f[5]) }, func(WinSize) {}, nil
	}
	master, slave, err := pty.Open()
	if err != nil {
		return Streams{}, nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	resize = func(sz WinSize) { _ = pty.Setsize(master, &pty.Winsize{Rows: sz.Rows, Cols: sz.Cols}) }
	if st.Rows > 0 && st.Cols > 0 {
		if err := pty.Setsize(master, &pty.Winsize{Rows: st.Rows, Cols: st.Cols}); err != nil {
			closeAll(master, slave)
			return Streams{}, nil, nil, fmt.Errorf("size the pseudo-terminal: %w", err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// The owner's end of input needs nothing: a terminal sends its own ^D.
	s = Streams{In: master, Out: master, CloseIn: func() {}, Close: func() { closeAll(master, slave) }}
	return s, func() { _ = slave.Close() }, resize, nil
}

// WaitCmd is Process.Wait for a sandbox that ends with cmd, started: it
// calls ended once cmd has exited, while its pid and process group are
// still its own, then reaps it.
func WaitCmd(cmd *exec.Cmd, ended func()) (int, error) {
	for {
		// WNOWAIT leaves cmd to be reaped by cmd.Wait.
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, nil, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	ended()
	err := cmd.Wait()
	if cmd.ProcessState == nil {
		return -1, fmt.Errorf("wait for %s: %w", cmd.Path, err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

// FileFingerprint names files as they are on disk now (device, inode,
// size, mtime): a rebuilt binary makes sandboxes started before it stale.
// Empty paths are skipped.
func FileFingerprint(paths ...string) (string, error) {
	var sb strings.Builder
	for _, p := range paths {
		if p == "" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return "", fmt.Errorf("fingerprint %s: %w", p, err)
		}
		fmt.Fprintf(&sb, "%s:%d:%d:%d:%d.%d;", p, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	return sb.String(), nil
}
