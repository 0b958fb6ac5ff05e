package runner

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// ErrProfile marks a run refused because the group's profile cannot be
// used: the file is malformed or missing, or does not define the name.
// Nothing runs: never fall back to other rights.
var ErrProfile = errors.New("sandbox profile not usable")

// profile is g's profile as the file says now.
func (r *Runner) profile(g domain.Group) (domain.Profile, error) {
	if r.cfg.Profile == nil {
		return domain.Profile{Name: domain.DefaultProfile, Network: domain.NetworkNone}, nil
	}
	p, err := r.cfg.Profile(g.ProfileName())
	if err != nil {
		return domain.Profile{}, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	return p, nil
}

// model is the model of a group's runs under p: its profile's, else the
// host's. The job names it and the run's socket pins it.
func (r *Runner) model(p domain.Profile) string { return cmp.Or(p.Model, r.cfg.Model) }

// profileLimits is lim with what p sets. The writable tmpfs stay within a
// quarter (/tmp) and a sixteenth (/dev/shm) of a smaller memory limit, so
// filling them cannot by itself exhaust it.
func profileLimits(lim sandbox.Limits, p domain.Profile) sandbox.Limits {
	if p.MemoryMB > 0 {
		lim.MemoryBytes = p.MemoryMB << 20
		lim.TmpBytes = min(lim.TmpBytes, lim.MemoryBytes/4)
		lim.ShmBytes = min(lim.ShmBytes, lim.MemoryBytes/16)
	}
	if p.Pids > 0 {
		lim.Pids = p.Pids
	}
	if p.CPUs > 0 {
		lim.CPUs = p.CPUs
	}
	if p.Timeout > 0 {
		lim.Timeout = min(p.Timeout, 24*time.Hour)
	}
	if p.DiskMB > 0 {
		lim.DiskBytes = p.DiskMB << 20
	}
	return lim
}
