package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// MaxUsageDays bounds how far back a usage report goes.
const MaxUsageDays = 366

// UsageText describes, for the owner (/usage, `clawpen usage`), the model
// tokens every group used on each of the last days days up to now's day
// (days in the service's time zone), and each group's daily budget where
// its profile sets one; profile resolves a profile name (nil: budgets are
// not shown).
func (s *Service) UsageText(ctx context.Context, days int, now time.Time, profile func(string) (domain.Profile, error)) (string, error) {
	if days < 1 || days > MaxUsageDays {
		return "", fmt.Errorf("days must be from 1 to %d, not %d", MaxUsageDays, days)
	}
	loc := s.cfg.Loc
	today := domain.Day(now, loc)
	y, m, d := now.In(loc).Date()
	from := time.Date(y, m, d-(days-1), 12, 0, 0, 0, loc).Format(domain.DayLayout)
	use, err := s.cfg.Store.UsageSince(ctx, from)
	if err != nil {
		return "", err
	}
	groups, err := s.cfg.Store.ListGroups(ctx)
	if err != nil {
		return "", fmt.Errorf("list groups: %w", err)
	}
	byModel, err := s.cfg.Store.ModelUsageSince(ctx, from)
	if err != nil {
		return "", err
	}
	heard, err := s.cfg.Store.TranscribedSince(ctx, from)
	if err != nil {
		return "", err
	}
	byGroup := map[string][]domain.Usage{}
	for _, u := range use {
		if u.Day <= today {
			byGroup[u.Group] = append(byGroup[u.Group], u)
		}
	}
	models := map[string][]domain.Usage{} // group/day -> its models
	for _, u := range byModel {
		models[u.Group+"/"+u.Day] = append(models[u.Group+"/"+u.Day], u)
	}
	audio := map[string][]domain.Transcribed{}
	for _, t := range heard {
		if t.Day <= today {
			audio[t.Group] = append(audio[t.Group], t)
			if _, ok := byGroup[t.Group]; !ok {
				byGroup[t.Group] = nil
			}
		}
	}
	profiles := map[string]string{} // folder -> profile name, registered groups
	for _, g := range groups {
		profiles[g.Folder] = g.ProfileName()
	}
	var folders []string
	for f := range byGroup {
		folders = append(folders, f)
	}
	// Registered groups with a budget show even without use.
	budgets := map[string]string{}
	for _, g := range groups {
		b := budgetWords(g.ProfileName(), profile)
		budgets[g.Folder] = b
		if _, used := byGroup[g.Folder]; !used && strings.HasPrefix(b, "budget ") {
			folders = append(folders, g.Folder)
		}
	}
	slices.SortFunc(folders, func(a, b string) int {
		if (a == domain.MainFolder) != (b == domain.MainFolder) {
			if a == domain.MainFolder {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})

	var b strings.Builder
	span := "today"
	if days > 1 {
		span = fmt.Sprintf("the last %d days", days)
	}
	fmt.Fprintf(&b, "Model tokens used %s (days in %s; input includes cache reads and writes):\n", span, loc)
	if len(folders) == 0 {
		b.WriteString("\nNo group used the model.\n")
		return b.String(), nil
	}
	var total, seconds int64
	for _, f := range folders {
		budget, registered := budgets[f]
		if !registered {
			budget = "no longer registered"
		}
		fmt.Fprintf(&b, "\n%s — %s\n", f, budget)
		limit := int64(0)
		if p, ok := profiles[f]; ok && profile != nil {
			if pr, err := profile(p); err == nil {
				limit = pr.DailyTokens
			}
		}
		if len(byGroup[f]) == 0 && len(audio[f]) == 0 {
			b.WriteString("  no use\n")
		}
		for _, u := range byGroup[f] {
			total += u.Total()
			fmt.Fprintf(&b, "  %s: %s", u.Day, tokenWords(u))
			ms := models[f+"/"+u.Day]
			if len(ms) == 1 && ms[0].Model != "" {
				b.WriteString(" on " + ms[0].Model)
			}
			if limit > 0 && u.Total() >= limit {
				b.WriteString(" — budget reached")
			}
			b.WriteString("\n")
			if len(ms) > 1 {
				for _, m := range ms {
					fmt.Fprintf(&b, "    %s: %s\n", cmp.Or(m.Model, "(unknown model)"), tokenWords(m))
				}
			}
		}
		for _, t := range audio[f] {
			seconds += t.Seconds
			fmt.Fprintf(&b, "  %s: %s of audio transcribed (%s)\n", t.Day, clock(t.Seconds), plural(t.Files, "file"))
		}
	}
	fmt.Fprintf(&b, "\nAll groups: %s tokens", thousands(total))
	if seconds > 0 {
		fmt.Fprintf(&b, ", %s of audio transcribed", clock(seconds))
	}
	b.WriteString(".\n")
	return b.String(), nil
}

// tokenWords is u's tokens in words.
func tokenWords(u domain.Usage) string {
	return fmt.Sprintf("%s tokens (%s in, %s out; %s)", thousands(u.Total()), thousands(u.Input), thousands(u.Output), plural(u.Requests, "answer"))
}

// clock is a length of audio: 0:42, 12:05, 1:02:03.
func clock(seconds int64) string {
	h, m, sec := seconds/3600, seconds/60%60, seconds%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// budgetWords says what a profile's budget is, in words.
func budgetWords(name string, profile func(string) (domain.Profile, error)) string {
	if profile == nil {
		return "profile " + name
	}
	p, err := profile(name)
	switch {
	case err != nil:
		return fmt.Sprintf("profile %s cannot be used, so it runs nothing", name)
	case p.DailyTokens > 0:
		return fmt.Sprintf("budget %s tokens a day (profile %s)", thousands(p.DailyTokens), name)
	}
	return fmt.Sprintf("no budget (profile %s)", name)
}

// thousands writes n with commas: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return thousands(n) + " " + word + "s"
}
