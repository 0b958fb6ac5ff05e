package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/tools"
)

func groupsCommand() *command {
	return &command{name: "groups", summary: "registered groups", dflt: "list", subs: []*command{
		{name: "list", summary: "registered groups and chats seen", flags: noFlags(groupsList)},
		{name: "add", args: "<chat_id> <folder> [name]", min: 2, max: -1,
			summary: "register a chat as a group",
			detail: "chat_id is the numeric Telegram chat id (negative for groups; see `groups list`).\n" +
				"folder names the group's workspace, groups/<folder>/ (created if missing).\n" +
				"name is the display name, the rest of the line; default: the folder.",
			flags: noFlags(groupsAdd)},
		{name: "remove", args: "<folder>", min: 1, max: 1,
			summary: "unregister a group (its folder is kept)", flags: noFlags(groupsRemove)},
		{name: "new", args: "<folder>", min: 1, max: 1,
			summary: "forget the group's conversation, as /new does in the main chat",
			detail:  "The group's next run starts without its earlier conversation. A run in progress\nmay still save what it had: /new in the main chat also forgets that.",
			flags:   noFlags(groupsNew)},
		{name: "policy", args: "<folder> <policy>", min: 2, max: 2,
			summary: "set who in a group may call the agent",
			detail: `policy is JSON: '{"allow":"*"|[user ids],"mode":"trigger"|"drop"}'. With "trigger" the messages` + "\n" +
				`of members not allowed stay as context; with "drop" they are not kept.`,
			flags: noFlags(groupsPolicy)},
		{name: "profile", args: "<folder> <name>", min: 2, max: 2,
			summary: "give a group a sandbox profile, as /profile does in the main chat",
			detail: "name is a profile the profiles file (CLAWPEN_PROFILES) defines now, or default (none of its own).\n" +
				"Any other name, or any name but default while the file is missing or malformed, is refused\n" +
				"and changes nothing. `clawpen profiles list` shows what each profile gives.",
			flags: noFlags(groupsProfile)},
		mountCommand(),
	}}
}

// store opens the database on first use; Run closes it.
func (s *session) store(ctx context.Context) (*store.Store, error) {
	if s.st == nil {
		st, err := app.OpenStore(ctx, s.cfg)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	return s.st, nil
}

// ops is the service the owner's operations go through, as serve's chat
// commands do, on the database opened on first use.
func (s *session) ops(ctx context.Context) (*ops.Service, error) {
	st, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	td := tools.NewDir(s.cfg.ToolsDir)
	return ops.New(ops.Config{Store: st, GroupsDir: s.cfg.GroupsDir, SandboxUser: app.SandboxRights(s.cfg.SandboxUser), Loc: s.cfg.TZ, MinInterval: s.cfg.MinInterval,
		Mounts: app.MountPolicy(s.cfg, slog.New(slog.DiscardHandler)), Profiles: s.cfg.Profiles,
		Tools: td, ToolEnv: s.cfg.HostEnv, Guard: app.Guard(s.cfg, td), Logger: s.log}), nil
}

func groupsList(ctx context.Context, s *session, _ []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	gs, err := st.ListGroups(ctx)
	if err != nil {
		return err
	}
	profiles := config.ReadProfiles(s.cfg.Profiles)
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FOLDER\tCHAT ID\tNAME\tPROFILE\tADDED")
	for _, g := range gs {
		prof := g.ProfileName()
		if _, err := profiles.Resolve(prof); err != nil {
			prof += " (cannot be used: runs nothing)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", g.Folder, g.ChatID, g.Name, prof, g.Added.Format(time.DateTime))
	}
	tw.Flush()
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	chats, err := svc.ListChats(ctx, domain.Owner())
	if err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, "\nChats seen:")
	tw = tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHAT ID\tTYPE\tTITLE\tLAST SEEN")
	for _, c := range chats {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.ID, c.Type, c.Title, c.LastSeen.Format(time.DateTime))
	}
	return tw.Flush()
}

func groupsAdd(ctx context.Context, s *session, args []string) error {
	chatID, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || chatID == 0 {
		return badUsage("chat_id %q: want a numeric Telegram chat id", args[0])
	}
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	g, err := svc.RegisterGroup(ctx, domain.Owner(), ops.GroupRequest{ChatID: chatID, Folder: args[1], Name: strings.Join(args[2:], " ")})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "registered %s (chat %d) with folder groups/%s\n", g.Name, g.ChatID, g.Folder)
	return nil
}

func groupsRemove(ctx context.Context, s *session, args []string) error {
	if args[0] == domain.MainFolder {
		return errors.New("the main group cannot be removed")
	}
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	ok, err := svc.UnregisterGroup(ctx, domain.Owner(), args[0])
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no group has the folder %q", args[0])
	}
	fmt.Fprintf(s.stdout, "unregistered %s (its folder is kept)\n", args[0])
	return nil
}

func groupsNew(ctx context.Context, s *session, args []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	if _, ok, err := st.GroupByFolder(ctx, args[0]); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("no group has the folder %q", args[0])
	}
	forgot, err := runner.ArchiveTranscript(s.cfg.DataDir, args[0], time.Now())
	if err != nil {
		return err
	}
	if !forgot {
		fmt.Fprintf(s.stdout, "%s has no saved conversation: its next run starts fresh\n", args[0])
		return nil
	}
	fmt.Fprintf(s.stdout, "forgot the conversation of %s: its next run starts fresh (archived in %s)\n", args[0], runner.ArchiveDir(s.cfg.DataDir, args[0]))
	return nil
}

func groupsPolicy(ctx context.Context, s *session, args []string) error {
	if _, err := domain.ParseSenderPolicy([]byte(args[1]), domain.DefaultSenderPolicy); err != nil {
		return badUsage("policy %s: %v", args[1], err)
	}
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	g, err := groupByFolder(ctx, st, args[0])
	if err != nil {
		return err
	}
	g.Policy = json.RawMessage(args[1])
	if err := st.PutGroup(ctx, g); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "sender policy of %s set\n", g.Folder)
	return nil
}

func groupByFolder(ctx context.Context, st *store.Store, folder string) (domain.Group, error) {
	g, ok, err := st.GroupByFolder(ctx, folder)
	if err != nil {
		return domain.Group{}, err
	}
	if !ok {
		return domain.Group{}, fmt.Errorf("no group has the folder %q", folder)
	}
	return g, nil
}
