// Package cli is the `clawpen` command line: serve, doctor, groups, tasks,
// mounts, profiles, usage, image, version. Every subcommand works on the same database
// as a running serve.
//
// Each command parses its own flags with the standard flag package; flags may
// come anywhere after the command's name, before, between or after its
// arguments, and "--" ends them. Exit codes: 0 done, 1 the operation failed,
// 2 the command line is wrong (the error names the bad part; usage follows).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
	"github.com/clawpen/clawpen/internal/store"
)

// Env is what a command line runs with: the process's own in main, a test's
// in tests.
type Env struct {
	Version        string
	Stdin          io.Reader // for `run`; nil reads nothing
	Stdout, Stderr io.Writer
	// DotEnv is loaded into the process environment before the
	// configuration is read, without overriding what is set; "" loads none.
	DotEnv string
	// Getenv reads the environment (os.Getenv); only config calls it.
	Getenv func(string) string
}

// A command is a node of the command tree: a leaf has run, a node has subs.
type command struct {
	name    string
	args    string // the positional arguments as the usage line shows them
	summary string // one line, for the command list
	detail  string // the arguments and behaviour, for --help
	// min and max bound the number of positional arguments; max -1: any.
	min, max int
	// rawAfter, when > 0: the arguments after that many positional ones are
	// taken as they are, flags included (run's command line).
	rawAfter int
	// flags declares the command's flags and returns what runs it.
	flags func(fs *flag.FlagSet) action
	// noConfig: runs without reading .env or the configuration.
	noConfig bool

	subs []*command
	// dflt is the subcommand a bare node runs ("groups" lists).
	dflt string
}

// An action runs a leaf with its positional arguments, already counted.
type action func(ctx context.Context, s *session, args []string) error

// session is one command's run: its configuration and outputs, and the
// database, opened on first use.
type session struct {
	cfg            config.Config
	log            *slog.Logger
	stdin          io.Reader
	stdout, stderr io.Writer
	version        string
	st             *store.Store
}

// usageError is a wrong command line: exit 2 with the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// noFlags is the flags function of a command that has none.
func noFlags(run action) func(*flag.FlagSet) action {
	return func(*flag.FlagSet) action { return run }
}

// commands is the command tree. Its order is the order of the help text.
func commands() *command {
	return &command{name: "clawpen", summary: "a sandboxed AI assistant host for Telegram", subs: []*command{
		{name: "serve", summary: "run the host (reads .env)",
			detail: "Polls Telegram and runs every agent invocation in a sandbox until interrupted (SIGINT or SIGTERM).",
			flags:  noFlags(serveCmd)},
		{name: "doctor", summary: "check token, key, sandbox, image, allowlist, profiles, data dir",
			detail: "Runs the checks serve needs and prints, for each problem, how to fix it. Exits 1 when any check fails.",
			flags:  noFlags(doctorCmd)},
		groupsCommand(),
		profilesCommand(),
		mountsCommand(),
		tasksCommand(),
		usageCommand(),
		auditCommand(),
		backupCommand(),
		healthCommand(),
		toolsCommand(),
		runCommand(),
		{name: "image", summary: "the Docker agent image", subs: []*command{
			{name: "build", summary: "build the Docker agent image (container/Dockerfile)",
				detail: "Builds CLAWPEN_AGENT_IMAGE from the project in the working directory and the clawpen-agent binary (CLAWPEN_AGENT_BIN, else beside clawpen, else $PATH).",
				flags:  noFlags(imageBuildCmd)},
		}},
		{name: "version", summary: "print the version", noConfig: true,
			flags: noFlags(func(_ context.Context, s *session, _ []string) error {
				fmt.Fprintln(s.stdout, "clawpen", s.version)
				return nil
			})},
	}}
}

// Run executes one command line (without the program name) and returns the
// exit code.
func Run(ctx context.Context, args []string, env Env) int {
	root := commands()
	if len(args) > 0 && args[0] == "help" {
		// "clawpen help tasks add" is "clawpen tasks add --help".
		return help(root, args[1:], env)
	}
	path, cmd, rest, err := resolve(root, args)
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(env.Stdout, path, cmd)
		return 0
	}
	if err != nil {
		return usageFail(env.Stderr, path, cmd, err)
	}
	fs := flag.NewFlagSet(strings.Join(path, " "), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the errors are printed below, with our usage
	run := cmd.flags(fs)
	pos, err := parse(fs, rest, cmd.rawAfter)
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(env.Stdout, path, cmd)
		return 0
	}
	if err == nil {
		err = countArgs(cmd, pos)
	}
	if err != nil {
		return usageFail(env.Stderr, path, cmd, err)
	}

	stdin := env.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	s := &session{stdin: stdin, stdout: env.Stdout, stderr: env.Stderr, version: env.Version}
	if !cmd.noConfig {
		if s.cfg, err = loadConfig(env); err != nil {
			fmt.Fprintln(env.Stderr, "clawpen: configuration:\n  "+strings.ReplaceAll(err.Error(), "\n", "\n  "))
			return 1
		}
	}
	level := slog.LevelInfo
	if s.cfg.Debug {
		level = slog.LevelDebug
	}
	s.log = app.NewLogger(env.Stderr, s.cfg, level)
	defer func() {
		if s.st != nil {
			_ = s.st.Close()
		}
	}()
	if err := run(ctx, s, pos); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return usageFail(env.Stderr, path, cmd, err)
		}
		var es exitStatus
		if errors.As(err, &es) {
			return int(es) // run's command said why, if anything
		}
		fmt.Fprintf(env.Stderr, "%s: %v\n", strings.Join(path, " "), err)
		return 1
	}
	return 0
}

func loadConfig(env Env) (config.Config, error) {
	if env.DotEnv != "" {
		if err := config.LoadDotEnv(env.DotEnv); err != nil {
			return config.Config{}, err
		}
	}
	return config.FromEnv(env.Getenv)
}

// resolve walks the command words at the front of args down to a leaf. It
// returns the path walked, the command reached and the rest of args; at a
// node, -h or --help is flag.ErrHelp.
func resolve(root *command, args []string) (path []string, cmd *command, rest []string, err error) {
	path, cmd = []string{root.name}, root
	for cmd.subs != nil {
		if len(args) == 0 {
			if cmd.dflt == "" {
				return path, cmd, nil, badUsage("missing command")
			}
			args = []string{cmd.dflt}
		}
		if isHelpFlag(args[0]) {
			return path, cmd, nil, flag.ErrHelp
		}
		next := cmd.sub(args[0])
		if next == nil {
			if strings.HasPrefix(args[0], "-") {
				return path, cmd, nil, badUsage("flag %s before the command: put flags after the command's name", args[0])
			}
			return path, cmd, nil, badUsage("unknown command %q", args[0])
		}
		path, cmd, args = append(path, next.name), next, args[1:]
	}
	return path, cmd, args, nil
}

func (c *command) sub(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

func isHelpFlag(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

// parse parses the flags in args wherever they are and returns the
// positional arguments in order. The flag package alone stops at the first
// argument; here a flag may also follow arguments. A negative number is an
// argument (group chat ids are negative), and "--" ends the flags.
func parse(fs *flag.FlagSet, args []string, rawAfter int) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case rawAfter > 0 && len(pos) == rawAfter:
			if a == "--" {
				i++
			}
			pos = append(pos, args[i:]...)
			i = len(args)
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) < 2 || a[0] != '-' || isNegativeNumber(a):
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			f := fs.Lookup(name)
			if f == nil && name != "h" && name != "help" {
				return nil, badUsage("unknown flag %s", strings.SplitN(a, "=", 2)[0])
			}
			if f != nil && !hasValue && !isBool(f) && i+1 < len(args) {
				i++
				flags = append(flags, args[i]) // the flag's value, whatever it looks like
			}
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	for _, r := range s[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func countArgs(cmd *command, pos []string) error {
	switch {
	case len(pos) < cmd.min:
		want := strings.Fields(cmd.args)
		if len(pos) < len(want) {
			return badUsage("missing argument %s", want[len(pos)])
		}
		return badUsage("missing arguments")
	case cmd.max >= 0 && len(pos) > cmd.max:
		return badUsage("unexpected argument %q", pos[cmd.max])
	}
	return nil
}

// usageFail reports a wrong command line: the error, then the usage.
func usageFail(w io.Writer, path []string, cmd *command, err error) int {
	fmt.Fprintf(w, "%s: %v\n\n", strings.Join(path, " "), err)
	writeHelp(w, path, cmd)
	return 2
}

// help answers "clawpen help [command...]".
func help(root *command, args []string, env Env) int {
	path, cmd := []string{root.name}, root
	for _, w := range args {
		next := cmd.sub(w)
		if next == nil {
			return usageFail(env.Stderr, path, cmd, badUsage("unknown command %q", w))
		}
		path, cmd = append(path, next.name), next
	}
	writeHelp(env.Stdout, path, cmd)
	return 0
}

// writeHelp prints a command's usage: a node lists its commands, a leaf its
// arguments and flags.
func writeHelp(w io.Writer, path []string, cmd *command) {
	name := strings.Join(path, " ")
	if cmd.subs != nil {
		if len(path) == 1 {
			fmt.Fprintf(w, "%s — %s\n\n", name, cmd.summary)
		}
		fmt.Fprintf(w, "Usage: %s <command> [arguments] [flags]\n\nCommands:\n", name)
		listLeaves(w, nil, cmd)
		if cmd.dflt != "" {
			fmt.Fprintf(w, "\nWith no command: %s %s.\n", name, cmd.dflt)
		}
		fmt.Fprintf(w, "\nFlags go after the command's name, anywhere among its arguments; \"--\" ends them.\n"+
			"\"%s <command> --help\" shows a command's arguments and flags.\n", name)
		return
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cmd.flags(fs)
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n", synopsis(name, cmd), upperFirst(cmd.summary))
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.detail)
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if value != "" {
			left += " " + value
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-22s %s\n", left, usage)
	})
	fmt.Fprintf(w, "  %-22s %s\n", "-h, --help", "show this help")
}

// listLeaves prints one line per leaf under cmd, prefixed with the words
// that lead to it.
func listLeaves(w io.Writer, prefix []string, cmd *command) {
	for _, c := range cmd.subs {
		words := append(append([]string{}, prefix...), c.name)
		if c.subs != nil {
			listLeaves(w, words, c)
			continue
		}
		left := synopsis(strings.Join(words, " "), c)
		if len(left) > 34 {
			fmt.Fprintf(w, "  %s\n  %-34s %s\n", left, "", c.summary)
		} else {
			fmt.Fprintf(w, "  %-34s %s\n", left, c.summary)
		}
	}
}

// synopsis is a leaf's name, arguments and flags on one line.
func synopsis(name string, cmd *command) string {
	parts := []string{name}
	if cmd.args != "" {
		parts = append(parts, cmd.args)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cmd.flags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if value, _ := flag.UnquoteUsage(f); value != "" {
			parts = append(parts, fmt.Sprintf("[--%s %s]", f.Name, value))
		} else {
			parts = append(parts, fmt.Sprintf("[--%s]", f.Name))
		}
	})
	return strings.Join(parts, " ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func serveCmd(ctx context.Context, s *session, _ []string) error {
	err := app.Serve(ctx, s.cfg, s.log, app.Hooks{})
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Told to stop (SIGTERM, ^C) while starting: what was asked.
		s.log.Info("stopped while starting", "at", err)
		return nil
	}
	return err
}

// errChecksFailed: doctor printed what failed; nothing to add.
var errChecksFailed = errors.New("some checks failed (see above)")

func doctorCmd(ctx context.Context, s *session, _ []string) error {
	if !app.Report(s.stdout, app.Doctor(ctx, s.cfg)) {
		return errChecksFailed
	}
	return nil
}

func imageBuildCmd(ctx context.Context, s *session, _ []string) error {
	bin, err := app.AgentBin(s.cfg)
	if err != nil {
		return err
	}
	if err := docker.BuildImage(ctx, docker.ImageOptions{ProjectRoot: ".", AgentBin: bin, Tag: s.cfg.AgentImage, Out: s.stdout}); err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, "built", s.cfg.AgentImage)
	return nil
}
