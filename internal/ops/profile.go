package ops

import (
	"context"
	"fmt"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
)

// Profiles is the profiles file as it reads now.
func (s *Service) Profiles() config.ProfilesNow {
	if s.cfg.Profiles == "" {
		return config.ProfilesNow{Err: fmt.Errorf("no profiles file configured: %w", config.ErrNoProfiles)}
	}
	return config.ReadProfiles(s.cfg.Profiles)
}

// SetGroupProfile gives the group at folder the sandbox profile name. A
// name the file does not define, or any name but the built-in default
// while the file is missing or malformed, is refused with the reason and
// changes nothing: a group is never given a profile that cannot run. Both
// the change and a refusal are written to the audit log.
func (s *Service) SetGroupProfile(ctx context.Context, c domain.Caller, folder, name string) (domain.Group, error) {
	return call(ctx, s, c, SetProfile, func(st *runState) (domain.Group, error) {
		if err := authorize(c, SetProfile, Target{Group: folder}); err != nil {
			return domain.Group{}, err
		}
		g, ok, err := s.cfg.Store.GroupByFolder(ctx, folder)
		if err != nil {
			return domain.Group{}, err
		}
		if !ok {
			return domain.Group{}, bad("no group has the folder %s", folder)
		}
		if _, err := s.Profiles().Resolve(name); err != nil {
			// The owner's refusals are not otherwise audited (call); this
			// one is a decision about rights, so it is.
			s.audit(ctx, st, SetProfile, "deny", fmt.Sprintf("profile %q for %s: %v", name, folder, err))
			return domain.Group{}, denied{reason: err.Error()}
		}
		stored := name
		if name == domain.DefaultProfile {
			stored = "" // the default is no profile of one's own
		}
		before := g.ProfileName()
		if err := s.cfg.Store.SetGroupProfile(ctx, folder, stored); err != nil {
			return domain.Group{}, err
		}
		g.Profile = stored
		s.audit(ctx, st, SetProfile, "allow", fmt.Sprintf("profile of %s: %s -> %s", folder, before, g.ProfileName()))
		return g, nil
	})
}
