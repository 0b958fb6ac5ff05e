package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// AgentPath is the agent binary inside the image.
const AgentPath = "/usr/local/bin/clawpen-agent"

// Labels every sandbox container carries; RemoveOrphans finds leftovers by the second.
const (
	LabelGroup      = "clawpen.group"
	LabelInvocation = "clawpen.invocation"
)

// logMaxSize bounds what the engine keeps of a container's output on disk; the
// host reads the output through the attach stream, not from the log.
const logMaxSize = "1m"

// createConfig is the container's configuration for spec: the same view as
// the bwrap backend, built from the image instead of the host's /usr, from
// the description every container backend shares (sandbox.OCISpec).
func (b *Backend) createConfig(spec sandbox.Spec, command []string) (*container.Config, *container.HostConfig, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	if b.seccomp == "" {
		return nil, nil, errors.New("no seccomp profile: the backend was not made by New")
	}
	if len(command) == 0 {
		command = b.defaultCommand()
	}
	oci, err := sandbox.OCISpec(spec, command, func(bd sandbox.Bind) (string, error) { return b.hostPath(bd.Source) })
	if err != nil {
		return nil, nil, err
	}
	proc := oci.Process
	cfg := &container.Config{
		Image:        b.cfg.Image,
		Hostname:     oci.Hostname,
		User:         fmt.Sprintf("%d:%d", proc.User.UID, proc.User.GID),
		Env:          proc.Env,
		Entrypoint:   proc.Args[:1],
		Cmd:          proc.Args[1:],
		WorkingDir:   proc.Cwd,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true, // closing our side of stdin gives the agent EOF
		Tty:          proc.Terminal,
		Labels:       b.labels(spec),
		// Not NetworkDisabled: the engine then skips the network namespace
		// altogether and the container would share the host's. NetworkMode
		// "none" below gives it its own namespace with only lo.
	}
	// An empty Cmd would let the image's CMD be appended to our entrypoint.
	if cfg.Cmd == nil {
		cfg.Cmd = []string{}
	}
	mounts, tmpfs, shm, err := engineMounts(oci.Mounts)
	if err != nil {
		return nil, nil, err
	}
	res := oci.Linux.Resources
	ulimits := make([]*container.Ulimit, 0, len(proc.Rlimits))
	for _, r := range proc.Rlimits {
		name := strings.ToLower(strings.TrimPrefix(r.Type, "RLIMIT_"))
		ulimits = append(ulimits, &container.Ulimit{Name: name, Soft: int64(r.Soft), Hard: int64(r.Hard)})
	}
	init := true
	host := &container.HostConfig{
		Mounts:         mounts,
		Tmpfs:          tmpfs,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", "seccomp=" + b.seccomp}, // the profile's JSON, not a path
		NetworkMode:    "none",
		IpcMode:        "private",
		Init:           &init,
		AutoRemove:     false, // Run reads the exit code and OOM state, then removes
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": logMaxSize, "max-file": "1"},
		},
		Runtime: b.cfg.Runtime,
		// The engine's /dev is a root-owned tmpfs the sandbox user cannot
		// write; /dev/shm (private IPC) is a tmpfs of ShmSize. The container's
		// memory cgroup counts tmpfs and shared memory, as bwrap's does.
		ShmSize: shm,
		Resources: container.Resources{
			Memory:     *res.Memory.Limit,
			MemorySwap: *res.Memory.Swap,
			NanoCPUs:   *res.CPU.Quota * 1e9 / int64(*res.CPU.Period),
			PidsLimit:  &res.Pids.Limit,
			Ulimits:    ulimits,
		},
	}
	return cfg, host, nil
}

// engineMounts are the description's mounts as the engine takes them:
// binds and read-only tmpfs (masks) as Mounts, which the engine mounts
// parents before children, so masks land on top; writable tmpfs as Tmpfs;
// /dev/shm as the size of the private IPC namespace's own.
func engineMounts(ms []specs.Mount) (mounts []mount.Mount, tmpfs map[string]string, shm int64, err error) {
	tmpfs = map[string]string{}
	size := func(m specs.Mount) int64 {
		v, _ := sandbox.MountOption(m, "size")
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			err = fmt.Errorf("tmpfs %s: size %q: %w", m.Destination, v, perr)
		}
		return n
	}
	for _, m := range ms {
		_, ro := sandbox.MountOption(m, "ro")
		switch {
		case m.Type == "bind":
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Destination, ReadOnly: ro,
				BindOptions: &mount.BindOptions{Propagation: mount.PropagationPrivate}})
		case m.Destination == "/dev/shm":
			shm = size(m)
		case ro:
			v, _ := sandbox.MountOption(m, "mode")
			mode, perr := strconv.ParseUint(v, 8, 32)
			if perr != nil {
				err = fmt.Errorf("tmpfs %s: mode %q: %w", m.Destination, v, perr)
			}
			mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: m.Destination, ReadOnly: true,
				TmpfsOptions: &mount.TmpfsOptions{SizeBytes: size(m), Mode: os.FileMode(mode)}})
		default:
			tmpfs[m.Destination] = strings.Join(m.Options, ",")
		}
	}
	return mounts, tmpfs, shm, err
}

func (b *Backend) labels(spec sandbox.Spec) map[string]string {
	l := map[string]string{LabelGroup: spec.Group, LabelInvocation: spec.InvocationID}
	for k, v := range b.scope {
		l[k] = v
	}
	return l
}

func (b *Backend) defaultCommand() []string {
	if len(b.cfg.Command) > 0 {
		return b.cfg.Command
	}
	return []string{AgentPath}
}

// hostPath is where the engine finds p, a path of this process (see
// Config.Root).
func (b *Backend) hostPath(p string) (string, error) {
	if b.cfg.HostRoot == "" {
		return p, nil
	}
	rel, err := filepath.Rel(b.cfg.Root, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("cannot bind %s: it is outside %s (CLAWPEN_ROOT), the only directory this host in a container shares with the Docker engine (as %s)", p, b.cfg.Root, b.cfg.HostRoot)
	}
	return filepath.Join(b.cfg.HostRoot, rel), nil
}
