package docker

import (
	"fmt"

	"github.com/moby/moby/api/types/mount"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/pin"
)

// The engine binds by path, so a validated extra mount whose path is swapped
// for a symlink before the container starts would bind the symlink's target.
// With Config.PinDir set (a root host on the Docker host itself), each extra
// mount is pinned (package pin) and the engine binds the staging path, i.e.
// the very directory that was validated.

// pins maps validated host paths to their staging paths for one invocation.
type pins struct {
	set   *pin.Set
	paths map[string]string
}

func (b *Backend) pin(spec sandbox.Spec) (*pins, error) {
	p := &pins{paths: map[string]string{}}
	if b.cfg.PinDir == "" || len(spec.Extra) == 0 {
		return p, nil
	}
	set, err := pin.NewSet(b.cfg.PinDir, spec.InvocationID)
	if err != nil {
		return p, err
	}
	p.set = set
	add := func(src string) error {
		staged, err := set.Add(src)
		if err != nil {
			return fmt.Errorf("extra mount: %w", err)
		}
		p.paths[src] = staged
		return nil
	}
	for _, m := range spec.Extra {
		if err := add(m.HostPath); err != nil {
			return p, err
		}
		for _, w := range m.Writable {
			if err := add(w); err != nil {
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
		if staged, ok := p.paths[m.Source]; ok && m.Type == mount.TypeBind {
			ms[i].Source = staged
		}
	}
}

// release undoes the staging binds; call after the container is gone.
func (p *pins) release() { p.set.Release() }
