package bwrap

// NewBaseline is the backend as every sandbox was before it had a cgroup, a
// seccomp filter and a session keyring of its own: the same view,
// namespaces, rlimits, output cap and reaping, without those three. It
// exists for one purpose, clawpen-bench's comparison of the sandbox start
// with and without them in one run; nothing that runs an agent uses it (no
// configuration reaches it), and its sandboxes are not limited in memory,
// processes or CPU.
func NewBaseline(cfg Config) (*Backend, error) { return newBackend(cfg, true) }
