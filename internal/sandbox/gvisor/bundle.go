package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// AgentPath is where the agent binary appears inside the sandbox (as under
// bwrap).
const AgentPath = "/opt/clawpen/bin/clawpen-agent"

// bundle is one invocation's OCI bundle: config.json, an empty root the
// runtime makes mount points in, and the synthesised /etc files. It lives
// in the host's private state dir (0700), never in a sandbox's view.
type bundle struct {
	dir  string
	pins *sandbox.PinSet
	// cgroup removes the cgroups makeCgroup made; nil until then.
	cgroup func()
}

func (b *bundle) remove() {
	if b.cgroup != nil {
		b.cgroup()
	}
	b.pins.Release()
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// writeBundle pins every bind source of spec and writes the bundle naming
// the staging paths only: a source swapped for a symlink after it was
// validated cannot redirect a bind (runsc's gofer opens sources by path).
func (g *Backend) writeBundle(spec sandbox.Spec, id string, command []string) (bd *bundle, err error) {
	bd = &bundle{dir: filepath.Join(g.bundles, id)}
	defer func() {
		if err != nil {
			bd.remove()
		}
	}()
	if err := os.MkdirAll(filepath.Join(bd.dir, "rootfs"), 0o700); err != nil {
		return bd, fmt.Errorf("bundle: %w", err)
	}
	// The root is the sandbox's "/": read-only, traversable.
	if err := os.Chmod(filepath.Join(bd.dir, "rootfs"), 0o755); err != nil {
		return bd, fmt.Errorf("bundle: %w", err)
	}
	if bd.pins, err = sandbox.NewPinSet(g.cfg.PinDir, id); err != nil {
		return bd, err
	}
	if err := g.makeCgroup(id, spec.Limits.WithDefaults()); err != nil {
		return bd, err
	}
	bd.cgroup = func() { g.removeCgroup(id) }
	s, err := g.ociSpec(spec, bd, command)
	if err != nil {
		return bd, err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return bd, fmt.Errorf("bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bd.dir, "config.json"), data, 0o600); err != nil {
		return bd, fmt.Errorf("bundle: %w", err)
	}
	return bd, nil
}

// ociSpec is the same view bwrap gives (sandbox.HostSystem,
// sandbox.EtcFiles, sandbox.WorkspaceBinds), as an OCI runtime spec.
func (g *Backend) ociSpec(spec sandbox.Spec, bd *bundle, command []string) (*specs.Spec, error) {
	lim := spec.Limits.WithDefaults()
	if len(command) == 0 {
		command = g.defaultCommand()
	}
	env := make([]string, 0, len(spec.Env)+3)
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		if sandbox.ValidEnvName(k) && k != "HOME" && k != "USER" && k != "PATH" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, "HOME="+domain.HomePath, "USER=agent", "PATH="+sandbox.PATH)

	ro := func(src, dst string) specs.Mount {
		return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "ro", "nosuid", "nodev"}}
	}
	tmpfs := func(dst string, size int64, mode string) specs.Mount {
		return specs.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=" + mode, "size=" + strconv.FormatInt(size, 10)}}
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		ro("/usr", "/usr"),
	}
	host := g.host
	for _, d := range host.RootBinds {
		mounts = append(mounts, ro(d, d))
	}
	// Merged-/usr aliases (/bin -> usr/bin): a bind of the target, since
	// the root itself is empty and read-only.
	for _, l := range host.RootLinks {
		mounts = append(mounts, ro(path.Join("/", l[0]), l[1]))
	}
	mounts = append(mounts, tmpfs("/dev/shm", lim.ShmBytes, "1777"))
	for i, f := range sandbox.EtcFiles {
		p := filepath.Join(bd.dir, "etc"+strconv.Itoa(i))
		if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		mounts = append(mounts, ro(p, f.Dest))
	}
	for _, d := range host.EtcBinds {
		mounts = append(mounts, ro(d, d))
	}
	if host.HasLocal {
		src := "/etc/localtime"
		if host.Localtime != "" {
			src = host.Localtime
		}
		mounts = append(mounts, ro(src, "/etc/localtime"))
	}
	mounts = append(mounts, tmpfs("/tmp", lim.TmpBytes, "1777"))

	binds := sandbox.WorkspaceBinds(spec)
	home := false
	for _, b := range binds {
		if b.Mask {
			dir, ok := sandbox.MaskDir(b.Source)
			switch {
			case !ok:
			case dir:
				mounts = append(mounts, specs.Mount{Destination: b.Dest, Type: "tmpfs", Source: "tmpfs",
					Options: []string{"ro", "nosuid", "nodev", "mode=0555", "size=4096"}})
			default:
				mounts = append(mounts, ro("/dev/null", b.Dest))
			}
			continue
		}
		o := sandbox.PinOptions{IDMap: g.idmap, ReadOnly: b.ReadOnly}
		if b.Source == spec.GlobalDir && b.ReadOnly {
			o.IDMap = g.nobody
		}
		staged, err := bd.pins.AddWith(b.Source, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.What, err)
		}
		opts := []string{"rbind", "rw", "nosuid", "nodev"}
		if b.ReadOnly {
			opts[1] = "ro"
		}
		mounts = append(mounts, specs.Mount{Destination: b.Dest, Type: "bind", Source: staged, Options: opts})
		home = home || b.Dest == domain.HomePath
	}
	if !home {
		m := tmpfs(domain.HomePath, lim.TmpBytes, "0700")
		m.Options = append(m.Options, "uid="+strconv.Itoa(sandbox.UID), "gid="+strconv.Itoa(sandbox.GID))
		mounts = append(mounts, m)
	}
	if g.cfg.AgentBin != "" {
		mounts = append(mounts, ro(g.cfg.AgentBin, AgentPath))
	}

	filter, err := sandbox.OCISeccomp()
	if err != nil {
		return nil, err
	}
	pids := int64(lim.Pids)
	period := uint64(100000)
	quota := int64(lim.CPUs*float64(period) + 0.5)
	noCaps := &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: sandbox.Hostname,
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			User: specs.User{UID: sandbox.UID, GID: sandbox.GID},
			Args: command,
			// A terminal: runsc's stdio is a pty's slave (stdio.go).
			Terminal:        spec.Stdio != nil && spec.Stdio.TTY,
			Env:             env,
			Cwd:             domain.GroupPath,
			NoNewPrivileges: true,
			Capabilities:    noCaps,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_FSIZE", Hard: sandbox.FileSizeLimit, Soft: sandbox.FileSizeLimit},
				{Type: "RLIMIT_NOFILE", Hard: sandbox.OpenFilesLimit, Soft: sandbox.OpenFilesLimit},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
			},
			CgroupsPath: g.cgroupPath(bd.dir),
			Seccomp:     filter,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &lim.MemoryBytes, Swap: &lim.MemoryBytes},
				Pids:   &specs.LinuxPids{Limit: pids},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
			},
		},
	}, nil
}

// cgroupPath is the container's cgroup, the same name under every v1
// controller: this host's directory, then the container id.
func (g *Backend) cgroupPath(bundleDir string) string {
	return "/" + g.cfg.Prefix + "/" + filepath.Base(bundleDir)
}

func (g *Backend) defaultCommand() []string {
	if len(g.cfg.Command) > 0 {
		return g.cfg.Command
	}
	return []string{AgentPath}
}
