// Package sandbox describes one agent invocation's isolated view, independent
// of the backend (bubblewrap or Docker) that builds it. See DESIGN.md, "Sandbox contract".
package sandbox

import (
	"io"
	"time"
)

// Paths inside every sandbox.
const (
	GroupPath  = "/workspace/group"
	GlobalPath = "/workspace/global"
	ExtraPath  = "/workspace/extra" // + "/<name>"
	HomePath   = "/home/agent"
	SocketPath = "/run/clawpen/host.sock"
	UID        = 1000
	GID        = 1000
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

// Limits bound what one invocation may consume.
type Limits struct {
	Timeout     time.Duration // wall time; the whole process tree is killed after it
	OutputBytes int64         // stdout cap; the sandbox is killed past it
	MemoryBytes int64
	Pids        int
	TmpBytes    int64 // size of the /tmp tmpfs
}

// DefaultLimits are used where the configuration sets none.
var DefaultLimits = Limits{
	Timeout:     10 * time.Minute,
	OutputBytes: 8 << 20,
	MemoryBytes: 1 << 30,
	Pids:        256,
	TmpBytes:    256 << 20,
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
	Extra          []Mount

	Env    map[string]string // already filtered through the environment allowlist
	Stdin  []byte            // the job
	Stdout io.Writer         // agent stdout, capped at Limits.OutputBytes
	Limits Limits
}

// Result is what the host learns about a finished invocation.
type Result struct {
	ExitCode        int
	TimedOut        bool
	OutputTruncated bool
	Stderr          string // tail, for the log
	Duration        time.Duration
}
