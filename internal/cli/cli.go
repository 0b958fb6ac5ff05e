// Package cli is the `clawpen` command line: serve, doctor, groups, tasks,
// version. Every subcommand works on the same database as a running serve.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/doctor"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/image"
	"github.com/clawpen/clawpen/internal/ipc"
	"github.com/clawpen/clawpen/internal/policy"
)

const usage = `clawpen — a sandboxed AI assistant host for Telegram

Usage:
  clawpen serve                        run the host (reads .env)
  clawpen doctor                       check token, key, sandbox, image, allowlist, data dir
  clawpen groups list                  registered groups and chats seen
  clawpen groups add <chat_id> <folder> [name]
  clawpen groups remove <folder>
  clawpen groups mount add <folder> <hostPath> <containerPath> [--rw] [--write <subpath>]...
  clawpen groups mount remove <folder> <containerPath> | list <folder>
  clawpen mounts check [folder]        each requested mount: decision and reason
  clawpen groups policy <folder> '{"allow":"*"|[ids],"mode":"trigger"|"drop"}'
  clawpen tasks list [folder]          scheduled tasks
  clawpen tasks add <folder> <cron|interval|once> <value> <prompt> [--isolated]
  clawpen tasks pause|resume|cancel <id>
  clawpen tasks runs <id>              the run log of a task
  clawpen image build                  build the Docker agent image (container/Dockerfile)
  clawpen bench [--json] [--quick] [--runs N] [--only sandbox,overhead,...]
                                       measure sandbox start, host overhead, throughput, footprint
  clawpen version
`

// Run executes one command line and returns the exit code.
func Run(args []string, version string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := config.LoadDotEnv(".env"); err != nil {
		fmt.Fprintln(stderr, "clawpen:", err)
		return 1
	}
	if args[0] == "bench" {
		// Before the configuration: bench brings its own fakes, needs no token.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchCmd(ctx, args[1:], stdout, stderr)
	}
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "clawpen: configuration:\n  "+strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "serve":
		if err := app.Serve(ctx, cfg, os.Getenv, log); err != nil {
			fmt.Fprintln(stderr, "clawpen serve:", err)
			return 1
		}
		return 0
	case "doctor":
		if !doctor.Report(stdout, app.Doctor(ctx, cfg, log)) {
			return 1
		}
		return 0
	case "groups":
		return groups(ctx, cfg, args[1:], stdout, stderr)
	case "tasks":
		return tasks(ctx, cfg, args[1:], stdout, stderr)
	case "mounts":
		if len(args) < 2 || args[1] != "check" {
			fmt.Fprintln(stderr, "usage: clawpen mounts check [folder]")
			return 2
		}
		st, err := app.OpenStore(ctx, cfg)
		if err != nil {
			fmt.Fprintln(stderr, "clawpen mounts:", err)
			return 1
		}
		defer st.Close()
		if err := mountsCheck(ctx, cfg, st, args[2:], stdout); err != nil {
			fmt.Fprintln(stderr, "clawpen mounts:", err)
			return 1
		}
		return 0
	case "image":
		if len(args) != 2 || args[1] != "build" {
			fmt.Fprintln(stderr, "usage: clawpen image build")
			return 2
		}
		bin, err := app.AgentBin(cfg)
		if err != nil {
			fmt.Fprintln(stderr, "clawpen image build:", err)
			return 1
		}
		if err := image.Build(ctx, image.Options{ProjectRoot: ".", AgentBin: bin, Tag: cfg.AgentImage, Out: stdout}); err != nil {
			fmt.Fprintln(stderr, "clawpen image build:", err)
			return 1
		}
		fmt.Fprintln(stdout, "built", cfg.AgentImage)
		return 0
	case "version":
		fmt.Fprintln(stdout, "clawpen", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "clawpen: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func logLevel() slog.Level {
	if os.Getenv("CLAWPEN_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func groups(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"list"}
	}
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "clawpen groups:", err)
		return 1
	}
	defer st.Close()
	fail := func(err error) int { fmt.Fprintln(stderr, "clawpen groups:", err); return 1 }
	switch args[0] {
	case "list":
		gs, err := st.ListGroups(ctx)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tCHAT ID\tNAME\tADDED")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", g.Folder, g.ChatID, g.Name, g.Added.Format(time.DateTime))
		}
		tw.Flush()
		chats, err := st.ListChats(ctx)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "\nChats seen:")
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHAT ID\tTYPE\tTITLE\tLAST SEEN")
		for _, c := range chats {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.ID, c.Type, c.Title, c.LastSeen.Format(time.DateTime))
		}
		tw.Flush()
		return 0
	case "add":
		rest := args[1:]
		if len(rest) < 2 {
			return fail(errors.New("usage: clawpen groups add <chat_id> <folder> [name]"))
		}
		chatID, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || chatID == 0 {
			return fail(fmt.Errorf("chat id %q: want a numeric Telegram chat id", rest[0]))
		}
		g, err := ipc.RegisterGroup(ctx, st, cfg.GroupsDir, chatID, rest[1], strings.Join(rest[2:], " "), "")
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "registered %s (chat %d) with folder groups/%s\n", g.Name, g.ChatID, g.Folder)
		return 0
	case "mount":
		if err := groupMount(ctx, cfg, st, args[1:], stdout); err != nil {
			return fail(err)
		}
		return 0
	case "policy":
		if len(args) != 3 {
			return fail(errors.New(`usage: clawpen groups policy <folder> '{"allow":"*"|[user ids],"mode":"trigger"|"drop"}'`))
		}
		g, ok, err := st.GroupByFolder(ctx, args[1])
		if err != nil {
			return fail(err)
		}
		if !ok {
			return fail(fmt.Errorf("no group has the folder %q", args[1]))
		}
		if _, err := policy.Parse([]byte(args[2]), policy.Default); err != nil {
			return fail(err)
		}
		g.Policy = json.RawMessage(args[2])
		if err := st.PutGroup(ctx, g); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "sender policy of %s set\n", g.Folder)
		return 0
	case "remove":
		if len(args) != 2 {
			return fail(errors.New("usage: clawpen groups remove <folder>"))
		}
		if args[1] == domain.MainFolder {
			return fail(errors.New("the main group cannot be removed"))
		}
		ok, err := st.DeleteGroup(ctx, args[1])
		if err != nil {
			return fail(err)
		}
		if !ok {
			return fail(fmt.Errorf("no group has the folder %q", args[1]))
		}
		fmt.Fprintf(stdout, "unregistered %s (its folder is kept)\n", args[1])
		return 0
	default:
		return fail(fmt.Errorf("unknown subcommand %q: use list, add, remove, mount or policy", args[0]))
	}
}
