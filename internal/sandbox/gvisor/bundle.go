package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

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
// sandbox.EtcFiles, sandbox.WorkspaceBinds), as an OCI runtime spec: the
// description every container backend shares (sandbox.OCISpec), with the
// host's system dirs and every bind source pinned.
func (g *Backend) ociSpec(spec sandbox.Spec, bd *bundle, command []string) (*specs.Spec, error) {
	if len(command) == 0 {
		command = g.defaultCommand()
	}
	s, err := sandbox.OCISpec(spec, command, func(b sandbox.Bind) (string, error) {
		o := sandbox.PinOptions{IDMap: g.idmap, ReadOnly: b.ReadOnly}
		if b.Source == spec.GlobalDir && b.ReadOnly {
			o.IDMap = g.nobody
		}
		return bd.pins.AddWith(b.Source, o)
	})
	if err != nil {
		return nil, err
	}
	ro := func(src, dst string) specs.Mount { return sandbox.BindMount(src, dst, true) }
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
	s.Mounts = append(mounts, s.Mounts...)
	if g.cfg.AgentBin != "" {
		s.Mounts = append(s.Mounts, ro(g.cfg.AgentBin, AgentPath))
	}

	if s.Linux.Seccomp, err = sandbox.OCISeccomp(); err != nil {
		return nil, err
	}
	s.Root = &specs.Root{Path: "rootfs", Readonly: true}
	s.Linux.Namespaces = []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
		{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
	}
	s.Linux.CgroupsPath = g.cgroupPath(bd.dir)
	return s, nil
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
