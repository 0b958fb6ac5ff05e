package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/moby/moby/api/types/mount"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// The engine binds by path, so a validated extra mount whose path is swapped
// for a symlink before the container starts would bind the symlink's target.
// With Config.PinDir set (a root host on the Docker host itself), each extra
// mount is opened without following symlinks and bind-mounted from that open
// file onto a private staging path under PinDir, which no sandbox can see; the
// engine binds the staging path, i.e. the very directory that was validated.

// pins maps validated host paths to their staging paths for one invocation.
type pins struct {
	dir   string
	paths map[string]string
}

func (b *Backend) pin(spec sandbox.Spec) (*pins, error) {
	p := &pins{paths: map[string]string{}}
	if b.cfg.PinDir == "" || len(spec.Extra) == 0 {
		return p, nil
	}
	p.dir = filepath.Join(b.cfg.PinDir, spec.InvocationID)
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return p, fmt.Errorf("pin extra mounts: %w", err)
	}
	n := 0
	add := func(src string) error {
		n++
		staged, err := pinOne(src, filepath.Join(p.dir, strconv.Itoa(n)))
		if err != nil {
			return fmt.Errorf("pin extra mount %s: %w", src, err)
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

// pinOne bind-mounts the file or directory at src, opened without following
// a final symlink, onto staged.
func pinOne(src, staged string) (string, error) {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = os.Mkdir(staged, 0o700)
	case unix.S_IFREG:
		err = os.WriteFile(staged, nil, 0o600)
	default:
		return "", errors.New("not a regular file or directory (symlinks are not followed)")
	}
	if err != nil {
		return "", err
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), staged, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(staged)
		return "", fmt.Errorf("bind to %s: %w", staged, err)
	}
	return staged, nil
}

// apply points the container's bind mounts at the staging paths.
func (p *pins) apply(ms []mount.Mount) {
	for i, m := range ms {
		if staged, ok := p.paths[m.Source]; ok && m.Type == mount.TypeBind {
			ms[i].Source = staged
		}
	}
}

// release unmounts and removes the staging paths; call after the container is gone.
func (p *pins) release() {
	for _, staged := range p.paths {
		_ = unix.Unmount(staged, unix.MNT_DETACH)
		_ = os.Remove(staged)
	}
	if p.dir != "" {
		_ = os.Remove(p.dir)
	}
}

// CleanPins removes staging binds a crash left under dir.
func CleanPins(dir string) error {
	invs, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean pinned mounts: %w", err)
	}
	for _, inv := range invs {
		d := filepath.Join(dir, inv.Name())
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			_ = unix.Unmount(p, unix.MNT_DETACH)
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("clean pinned mount %s: %w", p, err)
			}
		}
		if err := os.Remove(d); err != nil {
			return fmt.Errorf("clean pinned mounts: %w", err)
		}
	}
	return nil
}
