package mounts

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// Policy holds the mount allowlist, reloaded whenever its file changes, and
// turns a group's requested mounts into validated sandbox mounts.
type Policy struct {
	path    string
	home    string
	protect []Protected
	log     *slog.Logger
	// confine: a host in a container binds only what lies under its root.
	confine, confineWhy string

	mu     sync.Mutex
	loaded bool
	stamp  string // size and mtime of the file last loaded, "" when absent
	al     Allowlist
	err    error
}

// PolicyConfig says where the allowlist is and which of the host's own
// trees it must keep out of sandboxes.
type PolicyConfig struct {
	Allowlist string // the allowlist file (CLAWPEN_MOUNT_ALLOWLIST)
	DataDir   string
	GroupsDir string
	// Root and HostRoot are CLAWPEN_ROOT and CLAWPEN_HOST_ROOT: set, the host
	// runs in a container.
	Root, HostRoot string
}

// NewPolicy protects the data dir (nobody mounts it), the groups dir and
// the project (the working directory; only main may mount them).
//
// A host in a container (CLAWPEN_HOST_ROOT) instead confines every mount to
// CLAWPEN_ROOT, the one tree the engine can bind, and protects that tree as
// a whole only (nobody mounts it or what contains it): it is the image's
// working directory, and were it protected as the project, no group but
// main could have an extra mount at all. Its data and groups dirs keep their
// own protection, and .env inside it is a blocked name.
func NewPolicy(cfg PolicyConfig, log *slog.Logger) *Policy {
	home, _ := os.UserHomeDir()
	p := &Policy{path: cfg.Allowlist, home: home, log: log}
	p.protect = append(p.protect,
		Protected{Path: cfg.DataDir, What: "the clawpen data dir", Mode: ProtectAll},
		Protected{Path: cfg.GroupsDir, What: "the groups dir", Mode: ProtectNonMain})
	switch wd, err := os.Getwd(); {
	case cfg.HostRoot != "":
		p.protect = append(p.protect, Protected{Path: cfg.Root, What: "CLAWPEN_ROOT, the host's whole tree", Mode: ProtectContaining})
		p.confine = cfg.Root
		p.confineWhy = "CLAWPEN_ROOT: this host runs in a container, and the Docker engine can bind only what lies under it, as " +
			cfg.HostRoot + " (CLAWPEN_HOST_ROOT); put the folder there on the Docker host"
	case err == nil:
		p.protect = append(p.protect, Protected{Path: wd, What: "the clawpen project", Mode: ProtectNonMain})
	}
	return p
}

// Current returns the allowlist, reloading it when the file changed. A
// missing file is ErrNoAllowlist (no extra mounts); a malformed one is its
// error (no extra mounts, and the reason is logged once per change).
func (p *Policy) Current() (Allowlist, error) {
	stamp := ""
	if fi, err := os.Stat(p.path); err == nil {
		stamp = fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loaded && stamp == p.stamp {
		return p.al, p.err
	}
	p.loaded, p.stamp = true, stamp
	p.al, p.err = Load(p.path, p.home)
	if p.err == nil {
		for _, pr := range p.protect {
			if err := p.al.Protect(pr.Path, pr.What, pr.Mode); err != nil {
				p.al, p.err = Allowlist{}, err
				break
			}
		}
	}
	if p.err == nil && p.confine != "" {
		if err := p.al.Confine(p.confine, p.confineWhy); err != nil {
			p.al, p.err = Allowlist{}, err
		}
	}
	switch {
	case p.err == nil:
		p.log.Info("mount allowlist loaded", "path", p.path, "roots", len(p.al.Roots))
	case errors.Is(p.err, ErrNoAllowlist):
	default:
		p.log.Error("mount allowlist is malformed: no extra mounts until it is fixed", "path", p.path, "err", p.err)
	}
	return p.al, p.err
}

// Status is one line for /status and doctor.
func (p *Policy) Status() string {
	al, err := p.Current()
	switch {
	case errors.Is(err, ErrNoAllowlist):
		return fmt.Sprintf("Mount allowlist: none at %s (no extra mounts).", p.path)
	case err != nil:
		return fmt.Sprintf("Mount allowlist: MALFORMED, no extra mounts: %v", err)
	default:
		return fmt.Sprintf("Mount allowlist: %s, %d allowed roots.", p.path, len(al.Roots))
	}
}

// Refused is one requested mount (or write path) that was not granted, for
// the log and the audit log.
type Refused struct {
	Rule, Path, Reason string
}

// Resolve validates g's requested mounts against the current allowlist,
// right before an invocation, and lists what the sandbox may bind. Every
// refusal is returned for the audit log; nothing refused is bound.
func (p *Policy) Resolve(g domain.Group) ([]sandbox.Mount, []Refused) {
	if len(g.Mounts) == 0 {
		return nil, nil
	}
	al, err := p.Current()
	if err != nil {
		reason := "no mount allowlist: no extra mounts are granted"
		if !errors.Is(err, ErrNoAllowlist) {
			reason = "the mount allowlist is malformed: " + err.Error()
		}
		var rs []Refused
		for _, m := range g.Mounts {
			rs = append(rs, Refused{Rule: "allowlist", Path: m.HostPath, Reason: reason})
		}
		return nil, rs
	}
	var out []sandbox.Mount
	var refused []Refused
	for _, d := range Check(al, g.Mounts, g.IsMain()) {
		if d.Err != nil {
			refused = append(refused, refusalOf(d.Request.HostPath, d.Err))
			continue
		}
		m := d.Mount
		masks, err := Masks(m.HostPath, al, DefaultMaskLimit)
		if err != nil {
			refused = append(refused, Refused{Rule: "masks", Path: m.HostPath, Reason: "cannot check the tree for blocked names: " + err.Error()})
			continue
		}
		if m.Masks, err = resolveMasks(m.HostPath, masks); err != nil {
			refused = append(refused, Refused{Rule: "masks", Path: m.HostPath, Reason: "cannot check the tree for blocked names: " + err.Error()})
			continue
		}
		if m.ReadOnly {
			for _, w := range d.Request.WritePaths {
				hp, err := WritePath(al, m, w, g.IsMain())
				if err != nil {
					refused = append(refused, refusalOf(filepath.Join(d.Request.HostPath, w), err))
					continue
				}
				m.Writable = append(m.Writable, hp)
			}
		}
		out = append(out, m)
	}
	return out, refused
}

// WritePath checks one write sub-path of a read-only mount: a relative path
// inside the mount that exists, resolves inside it, passes the allowlist as a
// read-write mount of its own, and is not masked. It returns the resolved path.
func WritePath(al Allowlist, m sandbox.Mount, rel string, isMain bool) (string, error) {
	if rel == "" || !filepath.IsLocal(rel) {
		return "", &Refusal{Rule: "write-path", Path: rel, Reason: "a write path must be relative to its mount, without \"..\""}
	}
	sub, err := Validate(al, domain.MountRequest{HostPath: filepath.Join(m.HostPath, rel), ContainerPath: m.Name}, isMain)
	if err != nil {
		return "", err
	}
	if !inside(m.HostPath, sub.HostPath) || sub.HostPath == m.HostPath {
		return "", &Refusal{Rule: "write-path", Path: rel, Reason: fmt.Sprintf("resolves to %s, outside the mount %s", sub.HostPath, m.HostPath)}
	}
	if sub.ReadOnly {
		return "", &Refusal{Rule: "write-path", Path: rel, Reason: "read-write is not allowed here (the root or nonMainReadOnly forbids it)"}
	}
	return sub.HostPath, nil
}

// resolveMasks turns the mask list into host paths to hide. A masked symlink
// that points inside the mount hides its target; one pointing outside
// dangles in the sandbox, which shows nothing of it. A mask is reached with
// no symlink above it: one swapped in since the listing fails the mount
// (closed), for the sandbox could see the real entry once it is swapped
// back.
func resolveMasks(root string, rel []string) ([]string, error) {
	var out []string
	for _, r := range rel {
		p := filepath.Join(root, r)
		var st unix.Stat_t
		err := beneath.Lstat(p, &st)
		if errors.Is(err, os.ErrNotExist) {
			continue // gone since the listing
		}
		if err != nil {
			return nil, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			t, err := filepath.EvalSymlinks(p)
			if err != nil || !inside(root, t) {
				continue
			}
			p = t
		}
		out = append(out, p)
	}
	return out, nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func refusalOf(path string, err error) Refused {
	var r *Refusal
	if errors.As(err, &r) {
		return Refused{Rule: r.Rule, Path: r.Path, Reason: r.Error()}
	}
	return Refused{Rule: "error", Path: path, Reason: err.Error()}
}

// CheckRequests validates requested mounts now (when they are configured),
// returning the first refusal.
func (p *Policy) CheckRequests(reqs []domain.MountRequest, isMain bool) error {
	al, err := p.Current()
	if err != nil {
		return fmt.Errorf("no extra mounts can be granted: %w", err)
	}
	for _, d := range Check(al, reqs, isMain) {
		if d.Err != nil {
			return d.Err
		}
	}
	return nil
}
