package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/clawpen/clawpen/internal/domain"
)

func toolsCommand() *command {
	return &command{name: "tools", summary: "host bridge tools (CLAWPEN_TOOLS_DIR)", dflt: "list", subs: []*command{
		{name: "list", summary: "every bridge tool, who may call it, and the definitions skipped",
			flags: noFlags(toolsList)},
		{name: "check", summary: "validate the tool definitions",
			detail: "Prints each definition that is skipped, with its file and the reason, and exits 1 when there is one.",
			flags:  noFlags(toolsCheck)},
		{name: "run", args: "<name> [json-args]", min: 1, max: 2,
			summary: "call a bridge tool as the main group would, and print its answer",
			detail:  "The arguments are a JSON object (default {}), checked against the tool's input_schema.\nThe call is in the audit log like an agent's.",
			flags:   noFlags(toolsRun)},
	}}
}

func toolsList(ctx context.Context, s *session, _ []string) error {
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	views, problems, err := svc.Tools(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "%s\n\n", s.cfg.ToolsDir)
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tGROUPS\tCALLERS NOW\tTIMEOUT\tMAX OUTPUT\tENV\tCOMMAND")
	for _, v := range views {
		t := v.Tool
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, t.Groups, orNone(v.Callers), t.Timeout, t.MaxOutput, orNone(t.Env), strings.Join(t.Command, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(views) == 0 {
		fmt.Fprintln(s.stdout, "(no tools)")
	}
	for _, p := range problems {
		fmt.Fprintf(s.stdout, "skipped %s\n", p)
	}
	return nil
}

func toolsCheck(ctx context.Context, s *session, _ []string) error {
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	views, problems, err := svc.Tools(ctx)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(s.stdout, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d tool definitions skipped, %d loaded", len(problems), len(views))
	}
	fmt.Fprintf(s.stdout, "%d tools, no problems\n", len(views))
	return nil
}

func toolsRun(ctx context.Context, s *session, args []string) error {
	body := "{}"
	if len(args) > 1 {
		body = args[1]
	}
	if !json.Valid([]byte(body)) {
		return badUsage("the arguments are not JSON: %s", body)
	}
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	res, err := svc.HostTool(ctx, domain.Owner(), args[0], []byte(body))
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, string(out))
	if res.ExitCode != 0 {
		return errors.New("the tool's command failed (see exit_code)")
	}
	return nil
}
