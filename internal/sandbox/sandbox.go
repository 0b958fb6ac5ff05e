// Package sandbox describes one agent invocation's isolated view, independent
// of the backend (bubblewrap or Docker) that builds it (DESIGN.md, "Sandbox
// contract"), and pins the sources both backends bind (pin.go, idmap.go).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
)

// The uid and gid an agent runs as inside every sandbox. The paths it sees
// are domain's (domain.GroupPath …): the agent reads them too.
const (
	UID = 1000
	GID = 1000
)

// Mount is an extra, already validated host folder.
type Mount struct {
	HostPath string // resolved absolute host path
	Name     string // appears at /workspace/extra/<Name>
	ReadOnly bool
	// Writable are resolved host paths inside HostPath bound read-write over
	// a read-only mount.
	Writable []string
	// Masks are resolved host paths inside HostPath whose names match a
	// blocked pattern: an empty file or directory is bound over each.
	Masks []string
}

// Limits bound what one invocation may consume. Memory, Pids and CPUs are the
// sandbox's cgroup limits, the fields a sandbox profile sets (memory_mb,
// pids, cpus).
type Limits struct {
	Timeout     time.Duration // wall time; the whole process tree is killed after it
	OutputBytes int64         // stdout cap; the sandbox is killed past it
	// MemoryBytes is all the sandbox's memory together: every process, and
	// what it keeps in tmpfs (/tmp, /dev/shm), memfd and SysV shared memory.
	// No swap on top.
	MemoryBytes int64
	Pids        int     // processes and threads together
	CPUs        float64 // CPU time per wall time (1.5 = one and a half CPUs)
	TmpBytes    int64   // size of the /tmp tmpfs (and of a throw-away home)
	ShmBytes    int64   // size of the /dev/shm tmpfs
	// DiskBytes is the quota of the group's folder and session dir together,
	// checked before the run and watched by the host while it runs.
	DiskBytes int64
}

// Per-process limits every sandbox gets on both backends, besides Limits: the
// largest file one process may write, its open descriptors, and no core
// dumps (a core would go to the host's core_pattern handler).
const (
	FileSizeLimit  = 1 << 30
	OpenFilesLimit = 1024
)

// DefaultLimits are used where the configuration sets none. Every writable
// tmpfs together (/tmp, /dev/shm, a throw-away home) stays below MemoryBytes,
// so filling them cannot by itself drive the sandbox out of memory.
var DefaultLimits = Limits{
	Timeout:     10 * time.Minute,
	OutputBytes: 8 << 20,
	MemoryBytes: 1 << 30,
	Pids:        256,
	CPUs:        1,
	TmpBytes:    256 << 20,
	ShmBytes:    64 << 20,
	DiskBytes:   1 << 30,
}

// Spec is one invocation.
type Spec struct {
	InvocationID string
	Group        string // folder
	IsMain       bool

	GroupDir       string // host path of groups/<folder>, bound read-write
	GlobalDir      string // host path of groups/global
	GlobalWritable bool   // main only
	SessionDir     string // host path of data/sessions/<folder>, bound at /home/agent
	SocketPath     string // host path of this invocation's socket
	// CABundle is the host path of a file bound read-only at
	// domain.CABundlePath (the roots of a run with credentials); "": none.
	CABundle string
	Extra    []Mount

	Env   map[string]string // already filtered through the environment allowlist
	Stdin []byte            // the job
	// Job, when set, is waited for once the sandbox is up and its limits
	// are set (a warm sandbox, started ahead of its job): what it returns
	// is the job, given instead of Stdin. The wall clock (Limits.Timeout)
	// starts when the job is given. An error ends the sandbox unused, and
	// so does the sandbox's own end before its job: Run then returns an
	// error wrapping ErrUnused.
	Job    func(ctx context.Context) ([]byte, error)
	Stdout io.Writer // agent stdout, capped at Limits.OutputBytes
	Limits Limits

	// Runtime is domain.RuntimeGVisor when the group's profile asks for
	// gVisor whatever the host's backend; "": the host's backend. The
	// host routes the spec by it; a backend ignores it.
	Runtime string

	// Command runs instead of the agent (`clawpen run`); empty: the agent.
	Command []string
	// Stdio, when set, connects the command to the owner's terminal or pipes
	// instead of Stdin and Stdout (which are then unused).
	Stdio *Stdio
}

// ErrUnused is why Run ended a sandbox whose Spec.Job gave no job: it ran
// nothing.
var ErrUnused = errors.New("the sandbox was not used")

// ErrTimeLimit is the cause of a sandbox's context when its wall time ran
// out.
var ErrTimeLimit = errors.New("wall time limit reached")

// WaitJob is the job to write to the sandbox's stdin: Stdin, or what Job
// gives once it has one.
func (s Spec) WaitJob(ctx context.Context) ([]byte, error) {
	if s.Job == nil {
		return s.Stdin, nil
	}
	job, err := s.Job(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnused, err)
	}
	return job, nil
}

// Stdio is what a command run by hand reads and writes. Out is capped at
// Limits.OutputBytes like an agent's stdout.
type Stdio struct {
	In  io.Reader // read until EOF; the command's stdin then ends
	Out io.Writer
	Err io.Writer
	// TTY gives the command a terminal instead of pipes: a pseudo-terminal
	// made on the host (bwrap) or by the engine (Docker). Out then carries
	// stdout and stderr together. The seccomp filter still refuses TIOCSTI
	// on it.
	TTY        bool
	Rows, Cols uint16 // the terminal's size at the start; 0: left as is
	// Resize, under a terminal, brings the owner's terminal's new sizes
	// while the command runs; nil: none.
	Resize <-chan WinSize
}

// WinSize is a terminal's size in characters.
type WinSize struct{ Rows, Cols uint16 }

// Result is what the host learns about a finished invocation.
type Result struct {
	ExitCode        int
	TimedOut        bool
	OutputTruncated bool
	// Limit is the cgroup limit the kernel enforced on the sandbox, as the
	// host read it from the kernel's counters or the engine's state, never
	// from what the sandbox wrote: MemoryLimit when the OOM killer killed
	// one of its processes, ProcessLimit when a fork was refused; "" when
	// neither happened.
	Limit    Limit
	Stderr   string // tail, for the log
	Duration time.Duration
}

// Limit names a limit a sandbox reached.
type Limit string

// The limits a run is said to have reached: memory and processes are the
// cgroup's (Result.Limit); the disk quota is the host's own watcher's.
const (
	MemoryLimit  Limit = "memory"
	ProcessLimit Limit = "processes"
	DiskLimit    Limit = "disk"
)

// MaskDir reports whether the mask at hostPath (a resolved path from
// Mount.Masks) is a directory, hidden by an empty tmpfs, rather than a file,
// hidden by /dev/null. It is reached with no symlink in any component; ok is
// false when it cannot be (gone since it was listed, or a parent swapped
// for a symlink since), and the mask is then left out.
func MaskDir(hostPath string) (dir, ok bool) {
	var st unix.Stat_t
	if err := beneath.Lstat(hostPath, &st); err != nil {
		return false, false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, true
}
