package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// CheckHostRoot checks, for a host in a container (Config.HostRoot), that
// each of paths (the data and groups dirs) is where the engine will look for
// it: the host's own container must mount it from that very place on the
// Docker host. A wrong CLAWPEN_HOST_ROOT would hand every sandbox other
// folders than the host's, or none. A container the engine does not know
// (another engine, another runtime) cannot be checked: it is logged.
func (b *Backend) CheckHostRoot(ctx context.Context, paths ...string) error {
	if b.cfg.HostRoot == "" {
		return nil
	}
	self, err := selfID()
	if err != nil {
		return err
	}
	in, err := b.cli.ContainerInspect(ctx, self, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot check CLAWPEN_HOST_ROOT: the engine knows no container "+self, "container", self)
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect this host's container %s: %w", self, err)
	}
	for _, p := range paths {
		want, err := b.hostPath(p)
		if err != nil {
			return err
		}
		got, ok := engineSource(in.Container.Mounts, p)
		switch {
		case !ok:
			return fmt.Errorf("%s is on no mount of this container, so the Docker engine cannot bind it: mount CLAWPEN_HOST_ROOT=%s at CLAWPEN_ROOT=%s (-v %[2]s:%[3]s)", p, b.cfg.HostRoot, b.cfg.Root)
		case got != want:
			return fmt.Errorf("%s is %s on the Docker host, not %s: CLAWPEN_HOST_ROOT=%s is not what this container mounts at CLAWPEN_ROOT=%s", p, got, want, b.cfg.HostRoot, b.cfg.Root)
		}
	}
	return nil
}

// engineSource is where the engine has p, a path inside a container with
// these mounts: under the source of the deepest mount holding p. False when
// p is on none (the container's own filesystem).
func engineSource(mounts []container.MountPoint, p string) (string, bool) {
	best, found := container.MountPoint{}, false
	var rel string
	for _, m := range mounts {
		r, err := filepath.Rel(m.Destination, p)
		if m.Source == "" || err != nil || !filepath.IsLocal(r) {
			continue
		}
		if !found || len(m.Destination) > len(best.Destination) {
			best, rel, found = m, r, true
		}
	}
	if !found {
		return "", false
	}
	return filepath.Join(best.Source, rel), true
}

// containerHostname is the engine's per-container hostname file, bound at
// /etc/hostname in every container it runs.
var containerHostname = regexp.MustCompile(`/containers/([0-9a-f]{64})/hostname$`)

// selfID names the container this process runs in: by the source of its
// /etc/hostname bind, which holds the container's id whatever its hostname
// (with --network host it is the Docker host's), else by the hostname.
func selfID() (string, error) {
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		if id := idFromMountinfo(string(mi)); id != "" {
			return id, nil
		}
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("hostname: %w", err)
	}
	return h, nil
}

// idFromMountinfo finds the container id in the root of the /etc/hostname
// mount (fields 4 and 5 of proc(5)'s mountinfo).
func idFromMountinfo(mi string) string {
	for _, line := range strings.Split(mi, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "/etc/hostname" {
			continue
		}
		if m := containerHostname.FindStringSubmatch(f[3]); m != nil {
			return m[1]
		}
	}
	return ""
}
