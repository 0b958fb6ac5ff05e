package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func profilesCommand() *command {
	return &command{name: "profiles", summary: "sandbox profiles (CLAWPEN_PROFILES)", dflt: "list", subs: []*command{
		{name: "list", summary: "every profile: network, egress, limits, tools, daily_tokens, model, transcribe, and the groups using it",
			detail: "The built-in default included. A limit or model the profile does not set is the host's (shown in parentheses).",
			flags:  noFlags(profilesList)},
		{name: "revoke", args: "<folder> <host>[:port]", min: 2, max: 2,
			summary: "take back a destination the owner allowed a group, as /revoke does in the main chat",
			detail: "Under a profile's egress_ask the owner may allow a destination for a group (\"Allow for <group>\");\n" +
				"from now on the group's runs are asked about it again. A host alone revokes every port of it.",
			flags: noFlags(profilesRevoke)},
		{name: "check", summary: "validate the profiles file and the groups' profiles",
			detail: "Exits 1 when the file is malformed (the error names the file, the profile and the field)\n" +
				"or a group names a profile that cannot be used; a missing file is fine while no group names one.",
			flags: noFlags(profilesCheck)},
	}}
}

// groupsProfile is `clawpen groups profile <folder> <name>`, as /profile.
func groupsProfile(ctx context.Context, s *session, args []string) error {
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	g, err := svc.SetGroupProfile(ctx, domain.Owner(), args[0], args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "%s now runs with the profile %s, from its next run\n", g.Folder, g.ProfileName())
	return nil
}

// groupsByProfile reads the registered groups and who uses which profile.
func (s *session) groupsByProfile(ctx context.Context) ([]domain.Group, map[string][]string, error) {
	st, err := s.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	gs, err := st.ListGroups(ctx)
	if err != nil {
		return nil, nil, err
	}
	users := map[string][]string{}
	for _, g := range gs {
		users[g.ProfileName()] = append(users[g.ProfileName()], g.Folder)
	}
	return gs, users, nil
}

func profilesList(ctx context.Context, s *session, _ []string) error {
	now := config.ReadProfiles(s.cfg.Profiles)
	_, users, err := s.groupsByProfile(ctx)
	if err != nil {
		return err
	}
	switch {
	case now.Missing():
		fmt.Fprintf(s.stdout, "%s does not exist: only the built-in default is defined\n\n", s.cfg.Profiles)
	case now.Broken() != nil:
		fmt.Fprintf(s.stdout, "%v\nonly the built-in default can be used until the file is fixed\n\n", now.Broken())
	default:
		fmt.Fprintf(s.stdout, "%s\n\n", s.cfg.Profiles)
	}
	host := s.hostLimits()
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tNETWORK\tEGRESS\tMEMORY\tPIDS\tCPUS\tTIMEOUT\tDISK\tTOOLS\tDAILY TOKENS\tMODEL\tTRANSCRIBE\tGROUPS")
	names := now.Names()
	for _, name := range names {
		p, _ := now.Get(name)
		egress := orNone(p.Egress)
		if p.EgressAsk {
			egress += " (else ask the owner)"
		}
		model := "(" + s.cfg.Model + ")"
		if p.Model != "" {
			model = p.Model
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Network, egress,
			limit(p.MemoryMB, host.MemoryBytes>>20, "MiB"), limit(int64(p.Pids), int64(host.Pids), ""),
			cpus(p.CPUs, host.CPUs), duration(p, host), limit(p.DiskMB, host.DiskBytes>>20, "MiB"),
			orNone(p.Tools), tokens(p.DailyTokens), model, map[bool]string{false: "yes", true: "no"}[p.NoTranscribe], orNone(users[name]))
	}
	// Groups naming a profile the file does not give are listed too: they
	// run nothing.
	for _, name := range sortedNames(users) {
		if _, ok := now.Get(name); !ok {
			fmt.Fprintf(tw, "%s\t(undefined: these groups run nothing)\t\t\t\t\t\t\t\t\t\t\t%s\n", name, strings.Join(users[name], ", "))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return s.allowedEgress(ctx)
}

// allowedEgress lists the destinations the owner allowed groups under
// egress_ask, until revoked.
func (s *session) allowedEgress(ctx context.Context) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	allowed, err := st.ListEgressAllowed(ctx, "")
	if err != nil || len(allowed) == 0 {
		return err
	}
	fmt.Fprintln(s.stdout, "\nAllowed by the owner (egress_ask; clawpen profiles revoke <folder> <host> takes one back):")
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tDESTINATION\tSINCE")
	for _, a := range allowed {
		fmt.Fprintf(tw, "%s\t%s:%d\t%s\n", a.Group, a.Host, a.Port, a.Allowed.In(s.cfg.TZ).Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

// profilesRevoke is `clawpen profiles revoke <folder> <host>`, as /revoke.
func profilesRevoke(ctx context.Context, s *session, args []string) error {
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	n, err := svc.RevokeEgress(ctx, domain.Owner(), args[0], args[1])
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s had no allowance for %s; nothing changed", args[0], args[1])
	}
	fmt.Fprintf(s.stdout, "revoked: %s is asked about %s again from now on (%d)\n", args[0], args[1], n)
	return nil
}

func profilesCheck(ctx context.Context, s *session, _ []string) error {
	now := config.ReadProfiles(s.cfg.Profiles)
	gs, _, err := s.groupsByProfile(ctx)
	if err != nil {
		return err
	}
	var errs []error
	switch {
	case now.Broken() != nil:
		errs = append(errs, now.Broken())
	case now.Missing():
		fmt.Fprintf(s.stdout, "%s does not exist: only the built-in default is defined\n", s.cfg.Profiles)
	default:
		fmt.Fprintf(s.stdout, "%s is valid: %s\n", s.cfg.Profiles, strings.Join(now.Names(), ", "))
	}
	errs = append(errs, credentialVars(now, s.cfg.HostEnv)...)
	bad := now.Unusable(gs)
	for _, g := range gs {
		if err, ok := bad[g.Folder]; ok && now.Broken() == nil {
			errs = append(errs, fmt.Errorf("group %s runs nothing: %w (define it, or `clawpen groups profile %s default`)", g.Folder, err, g.Folder))
		} else if ok {
			errs = append(errs, fmt.Errorf("group %s runs nothing: its profile %s cannot be used while the file is broken", g.Folder, g.ProfileName()))
		}
	}
	return errors.Join(errs...)
}

// credentialVars finds the variables the profiles' credentials name that
// the host's environment does not set: requests to those hosts would be
// refused.
func credentialVars(now config.ProfilesNow, getenv func(string) string) []error {
	var errs []error
	for _, name := range now.Names() {
		p, _ := now.Get(name)
		for _, c := range p.Credentials {
			if _, err := c.Expand(getenv); err != nil {
				errs = append(errs, fmt.Errorf("profile %s: credential %s for %s: %w", name, c.Header, c.Authority(), err))
			}
		}
	}
	return errs
}

// hostLimits are the limits a profile that sets none gets, as serve sets them.
func (s *session) hostLimits() sandbox.Limits {
	lim := sandbox.DefaultLimits
	lim.Timeout = s.cfg.AgentTimeout
	lim.DiskBytes = s.cfg.DiskMB << 20
	return lim
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "-"
	}
	return strings.Join(list, ",")
}

// limit is a profile's value, or the host's marked as such.
func limit(v, host int64, unit string) string {
	if unit != "" {
		unit = " " + unit
	}
	if v > 0 {
		return strconv.FormatInt(v, 10) + unit
	}
	return fmt.Sprintf("(%d%s)", host, unit)
}

func cpus(v, host float64) string {
	if v > 0 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return "(" + strconv.FormatFloat(host, 'g', -1, 64) + ")"
}

func duration(p domain.Profile, host sandbox.Limits) string {
	if p.Timeout > 0 {
		return p.Timeout.String()
	}
	return "(" + host.Timeout.String() + ")"
}

func tokens(n int64) string {
	if n == 0 {
		return "no budget"
	}
	return strconv.FormatInt(n, 10)
}

func sortedNames(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
