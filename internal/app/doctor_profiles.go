package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
)

// profilesFinding checks the profiles file and the groups' profiles: a
// malformed file fails, and so does a group whose profile cannot be used
// (it runs nothing). A missing file is fine while every group runs with
// the built-in default.
func profilesFinding(ctx context.Context, cfg config.Config) Finding {
	f := Finding{Name: "profiles"}
	now := config.ReadProfiles(cfg.Profiles)
	var groups []domain.Group
	st, err := OpenStore(ctx, cfg)
	if err == nil {
		groups, err = st.ListGroups(ctx)
		_ = st.Close()
	}
	unread := ""
	if err != nil {
		unread = "; the groups' profiles were not checked (the database did not open: see the data line)"
	}
	bad := now.Unusable(groups)
	var folders, fixes []string
	for _, g := range groups {
		if _, ok := bad[g.Folder]; ok {
			folders = append(folders, fmt.Sprintf("%s (profile %s)", g.Folder, g.ProfileName()))
			fixes = append(fixes, fmt.Sprintf("`clawpen groups profile %s default`", g.Folder))
		}
	}
	stopped := ""
	if len(folders) > 0 {
		stopped = "; these groups run nothing: " + strings.Join(folders, ", ")
	}
	switch {
	case now.Broken() != nil:
		f.Verdict, f.Detail = Fail, now.Broken().Error()+"; only the built-in default can be used"+stopped+unread
		f.Fix = "fix the named field in " + cfg.Profiles + " (see configs/profiles.example.json), then `clawpen profiles check`"
	case len(folders) > 0 && now.Missing():
		f.Verdict, f.Detail = Fail, cfg.Profiles+" does not exist"+stopped
		f.Fix = "create " + cfg.Profiles + " defining their profiles (see configs/profiles.example.json), or give them the default: " + strings.Join(fixes, ", ")
	case len(folders) > 0:
		var names []string
		for _, g := range groups {
			if _, ok := bad[g.Folder]; ok {
				names = append(names, fmt.Sprintf("%q", g.ProfileName()))
			}
		}
		f.Verdict, f.Detail = Fail, cfg.Profiles+" does not define "+strings.Join(names, ", ")+stopped
		f.Fix = "define them in " + cfg.Profiles + ", or give the groups the default: " + strings.Join(fixes, ", ")
	case now.Missing():
		f.Verdict, f.Detail = OK, cfg.Profiles+" absent: every group runs with the built-in default"+unread
	default:
		f.Verdict, f.Detail = OK, cfg.Profiles+": "+strings.Join(now.Names(), ", ")+unread
	}
	if unread != "" && f.Verdict == OK {
		f.Verdict = Warn
	}
	return f
}
