package docker

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// AgentPath is the agent binary inside the image.
const AgentPath = "/usr/local/bin/clawpen-agent"

// Hostname is the sandbox's UTS name.
const Hostname = "clawpen"

// Labels every sandbox container carries; RemoveOrphans finds leftovers by the second.
const (
	LabelGroup      = "clawpen.group"
	LabelInvocation = "clawpen.invocation"
)

// sandboxPATH is the only PATH the agent gets.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// logMaxSize bounds what the engine keeps of a container's output on disk; the
// host reads the output through the attach stream, not from the log.
const logMaxSize = "1m"

// createConfig is the container's configuration for spec: the same view as the
// bwrap backend, built from the image instead of the host's /usr.
func (b *Backend) createConfig(spec sandbox.Spec, command []string) (*container.Config, *container.HostConfig, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	if b.seccomp == "" {
		return nil, nil, errors.New("no seccomp profile: the backend was not made by New")
	}
	lim := spec.Limits.WithDefaults()

	env := make([]string, 0, len(spec.Env)+3)
	for _, k := range sortedKeys(spec.Env) {
		if fixedEnv(k) {
			continue
		}
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, "HOME="+domain.HomePath, "USER=agent", "PATH="+sandboxPATH)

	if len(command) == 0 {
		command = b.defaultCommand()
	}
	cfg := &container.Config{
		Image:        b.cfg.Image,
		Hostname:     Hostname,
		User:         strconv.Itoa(sandbox.UID) + ":" + strconv.Itoa(sandbox.GID),
		Env:          env,
		Entrypoint:   command[:1],
		Cmd:          command[1:],
		WorkingDir:   domain.GroupPath,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true, // closing our side of stdin gives the agent EOF
		Tty:          spec.Stdio != nil && spec.Stdio.TTY,
		Labels:       b.labels(spec),
		// Not NetworkDisabled: the engine then skips the network namespace
		// altogether and the container would share the host's. NetworkMode
		// "none" below gives it its own namespace with only lo.
	}
	// An empty Cmd would let the image's CMD be appended to our entrypoint.
	if cfg.Cmd == nil {
		cfg.Cmd = []string{}
	}

	var unbindable []error
	bind := func(src, dst string, ro bool) mount.Mount {
		engineSrc, err := b.hostPath(src)
		if err != nil {
			unbindable = append(unbindable, err)
		}
		return mount.Mount{
			Type:        mount.TypeBind,
			Source:      engineSrc,
			Target:      dst,
			ReadOnly:    ro,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationPrivate},
		}
	}
	mounts := []mount.Mount{bind(spec.GroupDir, domain.GroupPath, false)}
	if spec.GlobalDir != "" {
		mounts = append(mounts, bind(spec.GlobalDir, domain.GlobalPath, !spec.GlobalWritable))
	}
	tmpfs := map[string]string{
		"/tmp": "rw,nosuid,nodev,mode=1777,size=" + strconv.FormatInt(lim.TmpBytes, 10),
	}
	if spec.SessionDir != "" {
		mounts = append(mounts, bind(spec.SessionDir, domain.HomePath, false))
	} else {
		// Like bwrap: a private, throw-away home when the host keeps no session.
		tmpfs[domain.HomePath] = "rw,nosuid,nodev,mode=0700,uid=" + strconv.Itoa(sandbox.UID) +
			",gid=" + strconv.Itoa(sandbox.GID) + ",size=" + strconv.FormatInt(lim.TmpBytes, 10)
	}
	if spec.SocketPath != "" {
		mounts = append(mounts, bind(spec.SocketPath, domain.SocketPath, false))
	}
	if spec.CABundle != "" {
		mounts = append(mounts, bind(spec.CABundle, domain.CABundlePath, true))
	}
	for _, m := range spec.Extra {
		dest := domain.ExtraPath + "/" + m.Name
		mounts = append(mounts, bind(m.HostPath, dest, m.ReadOnly))
		for _, w := range m.Writable {
			mounts = append(mounts, bind(w, sandbox.TargetFor(dest, m.HostPath, w), false))
		}
		// The engine mounts parents before children, so these land on top.
		for _, mask := range m.Masks {
			dir, ok := sandbox.MaskDir(mask)
			switch {
			case !ok:
			case dir:
				mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: sandbox.TargetFor(dest, m.HostPath, mask), ReadOnly: true,
					TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 4096, Mode: 0o555}})
			default:
				mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: "/dev/null", Target: sandbox.TargetFor(dest, m.HostPath, mask), ReadOnly: true,
					BindOptions: &mount.BindOptions{Propagation: mount.PropagationPrivate}})
			}
		}
	}

	if err := errors.Join(unbindable...); err != nil {
		return nil, nil, err
	}

	pids := int64(lim.Pids)
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
		ShmSize: lim.ShmBytes,
		Resources: container.Resources{
			Memory:     lim.MemoryBytes,
			MemorySwap: lim.MemoryBytes, // equal: no swap on top
			NanoCPUs:   int64(lim.CPUs*1e9 + 0.5),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "fsize", Soft: sandbox.FileSizeLimit, Hard: sandbox.FileSizeLimit},
				{Name: "nofile", Soft: sandbox.OpenFilesLimit, Hard: sandbox.OpenFilesLimit},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	return cfg, host, nil
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

// fixedEnv are variables the sandbox always gets with fixed values.
func fixedEnv(k string) bool { return k == "HOME" || k == "USER" || k == "PATH" }

func sortedKeys(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
