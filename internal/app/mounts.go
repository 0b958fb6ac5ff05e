package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// MountPolicy holds the mount allowlist, reloaded whenever its file changes,
// and turns a group's requested mounts into validated sandbox mounts.
type MountPolicy struct {
	path    string
	home    string
	protect []mounts.Protected
	log     *slog.Logger

	mu     sync.Mutex
	loaded bool
	stamp  string // size and mtime of the file last loaded, "" when absent
	al     mounts.Allowlist
	err    error
}

// NewMountPolicy protects the data dir (nobody mounts it), the groups dir and
// the project (the working directory; only main may mount them).
func NewMountPolicy(cfg config.Config, log *slog.Logger) *MountPolicy {
	home, _ := os.UserHomeDir()
	p := &MountPolicy{path: cfg.MountAllowlist, home: home, log: log}
	p.protect = append(p.protect,
		mounts.Protected{Path: cfg.DataDir, What: "the clawpen data dir", Mode: mounts.ProtectAll},
		mounts.Protected{Path: cfg.GroupsDir, What: "the groups dir", Mode: mounts.ProtectNonMain})
	if wd, err := os.Getwd(); err == nil {
		p.protect = append(p.protect, mounts.Protected{Path: wd, What: "the clawpen project", Mode: mounts.ProtectNonMain})
	}
	return p
}

// Current returns the allowlist, reloading it when the file changed. A
// missing file is ErrNoAllowlist (no extra mounts); a malformed one is its
// error (no extra mounts, and the reason is logged once per change).
func (p *MountPolicy) Current() (mounts.Allowlist, error) {
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
	p.al, p.err = mounts.Load(p.path, p.home)
	if p.err == nil {
		for _, pr := range p.protect {
			if err := p.al.Protect(pr.Path, pr.What, pr.Mode); err != nil {
				p.al, p.err = mounts.Allowlist{}, err
				break
			}
		}
	}
	switch {
	case p.err == nil:
		p.log.Info("mount allowlist loaded", "path", p.path, "roots", len(p.al.Roots))
	case errors.Is(p.err, mounts.ErrNoAllowlist):
	default:
		p.log.Error("mount allowlist is malformed: no extra mounts until it is fixed", "path", p.path, "err", p.err)
	}
	return p.al, p.err
}

// Status is one line for /status and doctor.
func (p *MountPolicy) Status() string {
	al, err := p.Current()
	switch {
	case errors.Is(err, mounts.ErrNoAllowlist):
		return fmt.Sprintf("Mount allowlist: none at %s (no extra mounts).", p.path)
	case err != nil:
		return fmt.Sprintf("Mount allowlist: MALFORMED, no extra mounts: %v", err)
	default:
		return fmt.Sprintf("Mount allowlist: %s, %d allowed roots.", p.path, len(al.Roots))
	}
}

// Refusal is one requested mount (or write path) that was not granted.
type Refusal struct {
	Rule, Path, Reason string
}

// Resolve validates g's requested mounts against the current allowlist,
// right before an invocation, and lists what the sandbox may bind. Every
// refusal is returned for the audit log; nothing refused is bound.
func (p *MountPolicy) Resolve(g domain.Group) ([]sandbox.Mount, []Refusal) {
	if len(g.Mounts) == 0 {
		return nil, nil
	}
	al, err := p.Current()
	if err != nil {
		reason := "no mount allowlist: no extra mounts are granted"
		if !errors.Is(err, mounts.ErrNoAllowlist) {
			reason = "the mount allowlist is malformed: " + err.Error()
		}
		var rs []Refusal
		for _, m := range g.Mounts {
			rs = append(rs, Refusal{Rule: "allowlist", Path: m.HostPath, Reason: reason})
		}
		return nil, rs
	}
	var out []sandbox.Mount
	var refused []Refusal
	for _, d := range mounts.Check(al, g.Mounts, g.IsMain()) {
		if d.Err != nil {
			refused = append(refused, refusalOf(d.Request.HostPath, d.Err))
			continue
		}
		m := d.Mount
		masks, err := mounts.Masks(m.HostPath, al, mounts.DefaultMaskLimit)
		if err != nil {
			refused = append(refused, Refusal{Rule: "masks", Path: m.HostPath, Reason: "cannot check the tree for blocked names: " + err.Error()})
			continue
		}
		m.Masks = resolveMasks(m.HostPath, masks)
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
func WritePath(al mounts.Allowlist, m sandbox.Mount, rel string, isMain bool) (string, error) {
	if rel == "" || !filepath.IsLocal(rel) {
		return "", &mounts.Refusal{Rule: "write-path", Path: rel, Reason: "a write path must be relative to its mount, without \"..\""}
	}
	sub, err := mounts.Validate(al, domain.MountRequest{HostPath: filepath.Join(m.HostPath, rel), ContainerPath: m.Name}, isMain)
	if err != nil {
		return "", err
	}
	if !inside(m.HostPath, sub.HostPath) || sub.HostPath == m.HostPath {
		return "", &mounts.Refusal{Rule: "write-path", Path: rel, Reason: fmt.Sprintf("resolves to %s, outside the mount %s", sub.HostPath, m.HostPath)}
	}
	if sub.ReadOnly {
		return "", &mounts.Refusal{Rule: "write-path", Path: rel, Reason: "read-write is not allowed here (the root or nonMainReadOnly forbids it)"}
	}
	return sub.HostPath, nil
}

// resolveMasks turns the mask list into host paths to hide. A masked symlink
// that points inside the mount hides its target; one pointing outside
// dangles in the sandbox, which shows nothing of it.
func resolveMasks(root string, rel []string) []string {
	var out []string
	for _, r := range rel {
		p := filepath.Join(root, r)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := filepath.EvalSymlinks(p)
			if err != nil || !inside(root, t) {
				continue
			}
			p = t
		}
		out = append(out, p)
	}
	return out
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func refusalOf(path string, err error) Refusal {
	var r *mounts.Refusal
	if errors.As(err, &r) {
		return Refusal{Rule: r.Rule, Path: r.Path, Reason: r.Error()}
	}
	return Refusal{Rule: "error", Path: path, Reason: err.Error()}
}

// CheckRequests validates requested mounts now (when they are configured),
// returning the first refusal.
func (p *MountPolicy) CheckRequests(reqs []domain.MountRequest, isMain bool) error {
	al, err := p.Current()
	if err != nil {
		return fmt.Errorf("no extra mounts can be granted: %w", err)
	}
	for _, d := range mounts.Check(al, reqs, isMain) {
		if d.Err != nil {
			return d.Err
		}
	}
	return nil
}
