package docker

import (
	"os"
	"sort"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

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

// DefaultNanoCPUs is one CPU.
const DefaultNanoCPUs = 1_000_000_000

// logMaxSize bounds what the engine keeps of a container's output on disk; the
// host reads the output through the attach stream, not from the log.
const logMaxSize = "1m"

// createConfig is the container's configuration for spec: the same view as the
// bwrap backend, built from the image instead of the host's /usr.
func (b *Backend) createConfig(spec sandbox.Spec, command []string) (*container.Config, *container.HostConfig, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	lim := spec.Limits.WithDefaults()

	env := make([]string, 0, len(spec.Env)+3)
	for _, k := range sortedKeys(spec.Env) {
		if fixedEnv(k) {
			continue
		}
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, "HOME="+sandbox.HomePath, "USER=agent", "PATH="+sandboxPATH)

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
		WorkingDir:   sandbox.GroupPath,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true, // closing our side of stdin gives the agent EOF
		Labels:       b.labels(spec),
		// Not NetworkDisabled: the engine then skips the network namespace
		// altogether and the container would share the host's. NetworkMode
		// "none" below gives it its own namespace with only lo.
	}
	// An empty Cmd would let the image's CMD be appended to our entrypoint.
	if cfg.Cmd == nil {
		cfg.Cmd = []string{}
	}

	bind := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{
			Type:        mount.TypeBind,
			Source:      b.hostPath(src),
			Target:      dst,
			ReadOnly:    ro,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationPrivate},
		}
	}
	mounts := []mount.Mount{bind(spec.GroupDir, sandbox.GroupPath, false)}
	if spec.GlobalDir != "" {
		mounts = append(mounts, bind(spec.GlobalDir, sandbox.GlobalPath, !spec.GlobalWritable))
	}
	tmpfs := map[string]string{
		"/tmp": "rw,nosuid,nodev,mode=1777,size=" + strconv.FormatInt(lim.TmpBytes, 10),
	}
	if spec.SessionDir != "" {
		mounts = append(mounts, bind(spec.SessionDir, sandbox.HomePath, false))
	} else {
		// Like bwrap: a private, throw-away home when the host keeps no session.
		tmpfs[sandbox.HomePath] = "rw,nosuid,nodev,mode=0700,uid=" + strconv.Itoa(sandbox.UID) +
			",gid=" + strconv.Itoa(sandbox.GID) + ",size=" + strconv.FormatInt(lim.TmpBytes, 10)
	}
	if spec.SocketPath != "" {
		mounts = append(mounts, bind(spec.SocketPath, sandbox.SocketPath, false))
	}
	for _, m := range spec.Extra {
		dest := sandbox.ExtraPath + "/" + m.Name
		mounts = append(mounts, bind(m.HostPath, dest, m.ReadOnly))
		for _, w := range m.Writable {
			mounts = append(mounts, bind(w, sandbox.TargetFor(dest, m.HostPath, w), false))
		}
		// The engine mounts parents before children, so these land on top.
		for _, mask := range m.Masks {
			fi, err := os.Lstat(mask)
			switch {
			case err != nil:
			case fi.IsDir():
				mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: sandbox.TargetFor(dest, m.HostPath, mask), ReadOnly: true,
					TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 4096, Mode: 0o555}})
			default:
				mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: "/dev/null", Target: sandbox.TargetFor(dest, m.HostPath, mask), ReadOnly: true,
					BindOptions: &mount.BindOptions{Propagation: mount.PropagationPrivate}})
			}
		}
	}

	pids := int64(lim.Pids)
	init := true
	nano := b.cfg.NanoCPUs
	if nano <= 0 {
		nano = DefaultNanoCPUs
	}
	host := &container.HostConfig{
		Mounts:         mounts,
		Tmpfs:          tmpfs,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		NetworkMode:    "none",
		IpcMode:        "private",
		Init:           &init,
		AutoRemove:     false, // Run reads the exit code and OOM state, then removes
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": logMaxSize, "max-file": "1"},
		},
		Runtime: b.cfg.Runtime,
		Resources: container.Resources{
			Memory:     lim.MemoryBytes,
			MemorySwap: lim.MemoryBytes, // equal: no swap on top
			NanoCPUs:   nano,
			PidsLimit:  &pids,
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

func (b *Backend) hostPath(p string) string {
	if b.cfg.HostPath == nil {
		return p
	}
	return b.cfg.HostPath(p)
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
