package sandbox

import (
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/clawpen/clawpen/internal/domain"
)

// cpuPeriod is the CFS period CPU limits are quotas of, in microseconds.
const cpuPeriod = 100000

// OCISpec is the part of a sandbox's OCI runtime spec that every container
// backend gives its runtime (Docker's engine, runsc), built once from the
// view: the process with its per-process limits, the cgroup limits, and the
// mounts of the workspace (WorkspaceBinds, masks, a throw-away home when
// there is no session dir) with /tmp and /dev/shm. A backend adds its
// system view, namespaces, seccomp and cgroup path. source is what the
// runtime binds for each bind's host path (a pin, a path of the Docker
// host); masks keep theirs.
func OCISpec(spec Spec, command []string, source func(Bind) (string, error)) (*specs.Spec, error) {
	lim := spec.Limits.WithDefaults()
	mounts := []specs.Mount{TmpfsMount("/tmp", lim.TmpBytes, "1777"), TmpfsMount("/dev/shm", lim.ShmBytes, "1777")}
	home := false
	for _, b := range WorkspaceBinds(spec) {
		if b.Mask {
			dir, ok := MaskDir(b.Source)
			switch {
			case !ok:
			case dir:
				m := TmpfsMount(b.Dest, 4096, "0555")
				m.Options[0] = "ro"
				mounts = append(mounts, m)
			default:
				mounts = append(mounts, BindMount("/dev/null", b.Dest, true))
			}
			continue
		}
		src, err := source(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.What, err)
		}
		mounts = append(mounts, BindMount(src, b.Dest, b.ReadOnly))
		home = home || b.Dest == domain.HomePath
	}
	if !home {
		m := TmpfsMount(domain.HomePath, lim.TmpBytes, "0700")
		m.Options = append(m.Options, "uid="+strconv.Itoa(UID), "gid="+strconv.Itoa(GID))
		mounts = append(mounts, m)
	}
	pids := int64(lim.Pids)
	period := uint64(cpuPeriod)
	quota := int64(lim.CPUs*cpuPeriod + 0.5)
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: Hostname,
		Process: &specs.Process{
			User: specs.User{UID: UID, GID: GID},
			Args: command,
			// A terminal for a command run by hand with one (Stdio.TTY).
			Terminal:        spec.Stdio != nil && spec.Stdio.TTY,
			Env:             Environ(spec.Env),
			Cwd:             domain.GroupPath,
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_FSIZE", Hard: FileSizeLimit, Soft: FileSizeLimit},
				{Type: "RLIMIT_NOFILE", Hard: OpenFilesLimit, Soft: OpenFilesLimit},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Resources: &specs.LinuxResources{
				// Swap equal to memory: no swap on top.
				Memory: &specs.LinuxMemory{Limit: &lim.MemoryBytes, Swap: &lim.MemoryBytes},
				Pids:   &specs.LinuxPids{Limit: pids},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
			},
		},
	}, nil
}

// BindMount binds src at dst, nosuid and nodev.
func BindMount(src, dst string, readOnly bool) specs.Mount {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", mode, "nosuid", "nodev"}}
}

// TmpfsMount is a writable tmpfs of size bytes at dst, nosuid and nodev.
func TmpfsMount(dst string, size int64, mode string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs",
		Options: []string{"rw", "nosuid", "nodev", "mode=" + mode, "size=" + strconv.FormatInt(size, 10)}}
}

// MountOption is the value of option name ("size" for "size=4096") in m's
// options, and whether m has it; a flag ("ro") has the value "".
func MountOption(m specs.Mount, name string) (string, bool) {
	for _, o := range m.Options {
		k, v, _ := strings.Cut(o, "=")
		if k == name {
			return v, true
		}
	}
	return "", false
}
