package docker

import (
	"fmt"

	"github.com/moby/moby/api/types/mount"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// The engine binds by path, so a validated source swapped for a symlink
// before the container starts would bind the symlink's target. With
// Config.PinDir set (a root host on the Docker host itself) every bind
// source is pinned (sandbox.PinSet) and the engine binds the staging path,
// i.e. the very file or directory that was opened. A pin is nosuid,nodev;
// with Config.DiskUID it is also idmapped, so that what the container's
// uid 1000 writes lands on disk as the sandbox user (see New).
//
// groups/global belongs to the sandbox user, which every sandbox writes as;
// main alone writes it, so a non-main group's pin of it shows it as
// nobody's: the container owns nothing there, even were the read-only bind
// lost.
//
// A read-only source gets a read-only pin and a plain bind: asking the
// engine for a read-only bind makes runc remount it, which would clear the
// pin's nosuid,nodev. A bind of a read-only pin is read-only.

// pinKey is one bind source as createConfig wrote it.
type pinKey struct {
	src string
	ro  bool
}

// pins maps the bind sources of one invocation to their staging paths.
type pins struct {
	set   *sandbox.PinSet
	paths map[pinKey]string
}

func (b *Backend) pin(spec sandbox.Spec) (*pins, error) {
	p := &pins{paths: map[pinKey]string{}}
	if b.cfg.PinDir == "" {
		return p, nil
	}
	set, err := sandbox.NewPinSet(b.cfg.PinDir, spec.InvocationID)
	if err != nil {
		return p, err
	}
	p.set = set
	add := func(what, src string, ro bool) error {
		k := pinKey{src, ro}
		if _, ok := p.paths[k]; ok || src == "" {
			return nil
		}
		o := sandbox.PinOptions{IDMap: b.idmap, ReadOnly: ro}
		if src == spec.GlobalDir && ro && b.nobody != nil {
			o.IDMap = b.nobody
		}
		staged, err := set.AddWith(src, o)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		p.paths[k] = staged
		return nil
	}
	if err := add("group folder", spec.GroupDir, false); err != nil {
		return p, err
	}
	if err := add("global folder", spec.GlobalDir, !spec.GlobalWritable); err != nil {
		return p, err
	}
	if err := add("session folder", spec.SessionDir, false); err != nil {
		return p, err
	}
	if err := add("host socket", spec.SocketPath, false); err != nil {
		return p, err
	}
	if err := add("CA bundle", spec.CABundle, true); err != nil {
		return p, err
	}
	for _, m := range spec.Extra {
		if err := add("extra mount "+m.Name, m.HostPath, m.ReadOnly); err != nil {
			return p, err
		}
		for _, w := range m.Writable {
			if err := add("writable path of "+m.Name, w, false); err != nil {
				return p, err
			}
		}
	}
	if b.afterPin != nil {
		b.afterPin()
	}
	return p, nil
}

// apply points the container's bind mounts at the staging paths.
func (p *pins) apply(ms []mount.Mount) {
	for i, m := range ms {
		if m.Type != mount.TypeBind {
			continue
		}
		if staged, ok := p.paths[pinKey{m.Source, m.ReadOnly}]; ok {
			ms[i].Source = staged
			ms[i].ReadOnly = false // the pin is read-only itself (see above)
		}
	}
}

// release undoes the staging binds; call after the container is gone.
func (p *pins) release() { p.set.Release() }

// CheckPins pins each path as a run would, and releases it: a root host
// learns at start, not at the first run, that this kernel or filesystem
// cannot make the (idmapped) pins.
func (b *Backend) CheckPins(paths ...string) error {
	if b.cfg.PinDir == "" {
		return nil
	}
	set, err := sandbox.NewPinSet(b.cfg.PinDir, "check")
	if err != nil {
		return err
	}
	defer set.Release()
	for _, p := range paths {
		if _, err := set.AddWith(p, sandbox.PinOptions{IDMap: b.idmap}); err != nil {
			return err
		}
	}
	return nil
}
