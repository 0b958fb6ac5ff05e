package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// MaxNameLen bounds containerPath, in bytes.
const MaxNameLen = 64

// Validate decides one mount request. It is allowed only when:
//   - hostPath is non-empty and, with "~" expanded (with al.Home), absolute;
//   - containerPath is a plain name (see ValidateName);
//   - no component of hostPath as written matches a blocked pattern;
//   - the path exists, and with every symlink resolved it is a directory or
//     a regular file (not a socket, device or fifo);
//   - the resolved path lies under a resolved allowed root, component-wise
//     (/home/u/projects2 is not under /home/u/projects);
//   - no component of the resolved path matches a blocked pattern;
//   - it keeps clear of the protected paths (see ProtectMode);
//   - with al.Bindable set, the resolved path lies inside it (Confine).
//
// The mount is read-write only when requested (ReadOnly false), allowed by
// the root, and, for non-main, NonMainReadOnly is false; otherwise it is
// read-only. Nested roots: the deepest root containing the path decides.
// The returned HostPath is the resolved path. A refusal is a *Refusal.
func Validate(al Allowlist, req domain.MountRequest, isMain bool) (sandbox.Mount, error) {
	m, _, err := validate(al, req, isMain)
	return m, err
}

// validate also returns why a requested read-write mount became read-only.
func validate(al Allowlist, req domain.MountRequest, isMain bool) (sandbox.Mount, string, error) {
	p := req.HostPath
	if p == "" {
		return sandbox.Mount{}, "", refuse(RuleHostPath, p, "hostPath is empty")
	}
	if strings.ContainsRune(p, 0) {
		return sandbox.Mount{}, "", refuse(RuleHostPath, p, "hostPath contains a NUL byte")
	}
	if len(al.Roots) == 0 {
		return sandbox.Mount{}, "", refuse(RuleNoRoots, p, "the mount allowlist allows no roots, so no extra mounts")
	}
	if err := ValidateName(req.ContainerPath); err != nil {
		return sandbox.Mount{}, "", refuse(RuleContainerPath, p, "%v", err)
	}
	expanded, err := expandHome(p, al.Home)
	if err != nil {
		return sandbox.Mount{}, "", refuse(RuleHostPath, p, "%v", err)
	}
	if !isAbs(expanded) {
		return sandbox.Mount{}, "", refuse(RuleHostPath, p, "hostPath is relative; write an absolute path or ~/…")
	}
	ps := al.patterns()
	if c, pat, hit := blockedComponent(expanded, ps); hit {
		return sandbox.Mount{}, "", refuse(RuleBlocked, p, "path component %q matches blocked pattern %q", c, pat)
	}
	// No filepath.Clean first: "link/.." must go where the kernel goes (the
	// link target's parent), and EvalSymlinks resolves ".." that way.
	resolved, err := filepath.EvalSymlinks(expanded)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sandbox.Mount{}, "", refuse(RuleNotFound, p, "does not exist")
		}
		return sandbox.Mount{}, "", refuse(RuleNotFound, p, "cannot resolve: %v", err)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return sandbox.Mount{}, "", refuse(RuleNotFound, p, "cannot stat %s: %v", resolved, err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return sandbox.Mount{}, "", refuse(RuleFileType, p, "resolves to %s, which is a %s, not a directory or regular file", resolved, fileKind(fi.Mode()))
	}
	if al.Bindable != "" {
		if dir := resolveBest(al.Bindable); !within(resolved, dir) {
			return sandbox.Mount{}, "", refuse(RuleNotBindable, p, "resolves to %s, outside %s (%s)", resolved, dir, al.BindableWhat)
		}
	}
	root, ok := al.rootOf(resolved)
	if !ok {
		return sandbox.Mount{}, "", refuse(RuleOutsideRoots, p, "resolves to %s which is outside every allowed root", resolved)
	}
	if c, pat, hit := blockedComponent(resolved, ps); hit {
		return sandbox.Mount{}, "", refuse(RuleBlocked, p, "resolves to %s whose component %q matches blocked pattern %q", resolved, c, pat)
	}
	if r := al.checkProtected(p, resolved, isMain); r != nil {
		return sandbox.Mount{}, "", r
	}

	m := sandbox.Mount{HostPath: resolved, Name: req.ContainerPath, ReadOnly: true}
	note := ""
	if !req.ReadOnly {
		switch {
		case !root.AllowReadWrite:
			note = fmt.Sprintf("read-only: root %s does not allow read-write", root.Path)
		case !isMain && al.NonMainReadOnly:
			note = "read-only: nonMainReadOnly is set"
		default:
			m.ReadOnly = false
		}
	}
	return m, note, nil
}

// ValidateName checks a containerPath: 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], not starting with '-', not "." and without "..". It is a
// single name under /workspace/extra, never a path: no '/', ':', NUL, spaces
// or control characters can pass the charset.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("containerPath is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("containerPath %q is longer than %d bytes", name, MaxNameLen)
	case name == "." || strings.Contains(name, ".."):
		return fmt.Errorf("containerPath %q must be a plain name (no \"..\")", name)
	case name[0] == '-':
		return fmt.Errorf("containerPath %q must not start with '-'", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("containerPath %q must be a plain name of A-Z a-z 0-9 . _ -", name)
		}
	}
	return nil
}

// rootOf returns the deepest root containing p.
func (a Allowlist) rootOf(p string) (Root, bool) {
	var best Root
	found := false
	for _, r := range a.Roots {
		if within(p, r.Resolved) && (!found || len(r.Resolved) > len(best.Resolved)) {
			best, found = r, true
		}
	}
	return best, found
}

// within reports whether p is dir or inside it, comparing whole components.
// Both must be clean absolute paths.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// checkProtected reports the first protected path the request runs into,
// preferring "is"/"is inside" over "contains" as the more telling reason.
func (a Allowlist) checkProtected(requested, resolved string, isMain bool) *Refusal {
	var containing *Refusal
	for _, pr := range a.Protected {
		pp := resolveBest(pr.Path)
		equal := resolved == pp
		inside := !equal && within(resolved, pp)
		contains := !equal && within(pp, resolved)
		if !equal && !inside && !contains {
			continue
		}
		var refused bool
		switch pr.Mode {
		case ProtectAll:
			refused = equal || inside || !isMain // main: masked instead (see Masks)
		case ProtectNonMain:
			refused = !isMain
		case ProtectContaining:
			refused = equal || contains
		}
		if !refused {
			continue
		}
		var rel string
		switch {
		case equal:
			rel = "is"
		case inside:
			rel = "is inside"
		default:
			rel = "contains"
		}
		who := ""
		if pr.Mode == ProtectNonMain || (pr.Mode == ProtectAll && contains) {
			who = " (refused for non-main groups)"
		}
		r := refuse(RuleProtected, requested, "resolves to %s, which %s %s (%s)%s", resolved, rel, pr.What, pp, who)
		if !contains {
			return r
		}
		if containing == nil {
			containing = r
		}
	}
	return containing
}

// resolveBest resolves symlinks in the longest existing prefix of p, so a
// protected path that does not exist yet still compares right.
func resolveBest(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	dir = filepath.Clean(dir)
	if dir == p || base == "" {
		return p
	}
	return filepath.Join(resolveBest(dir), base)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "special file"
	}
}
