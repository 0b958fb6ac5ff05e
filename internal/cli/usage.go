package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ops"
)

func usageCommand() *command {
	return &command{name: "usage", summary: "model tokens per group and day, and the daily budgets",
		detail: "Shows the tokens every group used on each of the last N days (days in TZ), as the host's\n" +
			"model proxy counted them, and each group's daily budget where its profile sets one.",
		flags: func(fs *flag.FlagSet) action {
			days := fs.Int("days", 7, fmt.Sprintf("`N` days back, today included (1-%d)", ops.MaxUsageDays))
			return func(ctx context.Context, s *session, _ []string) error {
				if *days < 1 || *days > ops.MaxUsageDays {
					return badUsage("--days must be from 1 to %d, not %d", ops.MaxUsageDays, *days)
				}
				svc, err := s.ops(ctx)
				if err != nil {
					return err
				}
				text, err := svc.UsageText(ctx, *days, s.cfg.UsageNow(), func(name string) (domain.Profile, error) {
					return config.ResolveProfile(s.cfg.Profiles, name)
				})
				if err != nil {
					return err
				}
				fmt.Fprint(s.stdout, text)
				return nil
			}
		}}
}
