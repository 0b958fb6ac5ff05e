package sandbox

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Validate rejects a spec that a backend could not express safely: what the
// bwrap command line or the Docker engine would misread, or what would escape
// the sandbox's view.
func (s Spec) Validate() error {
	if s.GroupDir == "" {
		return fmt.Errorf("spec has no GroupDir")
	}
	for _, p := range []string{s.GroupDir, s.GlobalDir, s.SessionDir, s.SocketPath, s.CABundle} {
		if p != "" && !path.IsAbs(p) {
			return fmt.Errorf("bind source %q is not an absolute path", p)
		}
	}
	for k, v := range s.Env {
		if !ValidEnvName(k) {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s contains NUL", k)
		}
	}
	for _, a := range s.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("command argument %q contains NUL", a)
		}
	}
	if len(s.Command) > 0 && s.Command[0] == "" {
		return fmt.Errorf("command has an empty program name")
	}
	if s.Stdio != nil && (s.Stdio.In == nil || s.Stdio.Out == nil || s.Stdio.Err == nil) {
		return fmt.Errorf("stdio needs In, Out and Err")
	}
	seen := map[string]bool{}
	for _, m := range s.Extra {
		// ":" and "," would split Docker's mount syntax; "/" and the dot names
		// would place the mount outside /workspace/extra/<name>.
		if m.Name == "" || m.Name == "." || m.Name == ".." || strings.ContainsAny(m.Name, "/\x00:,") {
			return fmt.Errorf("invalid extra mount name %q", m.Name)
		}
		if seen[m.Name] {
			return fmt.Errorf("duplicate extra mount name %q", m.Name)
		}
		seen[m.Name] = true
		if m.HostPath == "" || !path.IsAbs(m.HostPath) {
			return fmt.Errorf("extra mount %q needs an absolute host path, got %q", m.Name, m.HostPath)
		}
	}
	return nil
}

// ValidEnvName reports whether k is a portable environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// WithDefaults fills unset (zero or negative) limits from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = d.TmpBytes
	}
	if l.ShmBytes <= 0 {
		l.ShmBytes = d.ShmBytes
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = d.DiskBytes
	}
	return l
}

// TargetFor maps hostPath, a host path inside hostRoot, to the same place
// under dest, the sandbox path where hostRoot is mounted. hostRoot itself, or
// a path that cannot be made relative to it, maps to dest.
func TargetFor(dest, hostRoot, hostPath string) string {
	rel, err := filepath.Rel(hostRoot, hostPath)
	if err != nil || rel == "." {
		return dest
	}
	return dest + "/" + filepath.ToSlash(rel)
}
