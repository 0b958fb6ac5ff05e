// Package tools holds the host bridge tools (DESIGN.md, "Host bridge
// tools"): commands the owner defines, one Markdown file each, that run on
// the host for agents that may call them. It parses and checks the
// definitions, decides who may call a tool (a pure function), and runs a
// call: arguments checked against the tool's JSON Schema, each placeholder
// one argv element, a clean environment, a cgroup of its own that nothing
// it starts outlives, bounded time and output.
package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/clawpen/clawpen/internal/domain"
)

// Builtins are the agent's own tools (DESIGN.md, "Agent runner"): a bridge
// tool of one of these names would change what the model believes it calls.
var Builtins = []string{"bash", "read_file", "write_file", "edit_file", "list_files", "send_message",
	"schedule_task", "update_task", "list_tasks", "pause_task", "resume_task", "cancel_task",
	"register_group", "list_chats", "send_file"}

// Defaults and bounds of a definition.
const (
	DefaultTimeout   = 30 * time.Second
	MaxTimeout       = 10 * time.Minute
	DefaultMaxOutput = 64 << 10
	MaxMaxOutput     = 1 << 20
	maxFileBytes     = 256 << 10
	maxArgv          = 256
)

// Approval settings of a tool.
const (
	ApprovalNever  = "never"  // no call waits (the default)
	ApprovalGroups = "groups" // calls of groups other than main wait for the owner
	ApprovalAlways = "always" // every agent's call waits, main's too
)

// NeedsApproval reports whether a call of t by c waits for the owner's
// press. The owner's own calls (clawpen tools run) never do.
func (t *Tool) NeedsApproval(c domain.Caller) bool {
	switch {
	case c.Owner:
		return false
	case t.Approval == ApprovalAlways:
		return true
	}
	return t.Approval == ApprovalGroups && !c.IsMain
}

// Who may call a tool besides main (Groups.All) or which folders (Groups.Folders).
type Groups struct {
	All     bool
	Folders []string // main's folder included when main may call it
}

func (g Groups) String() string {
	if g.All {
		return "all"
	}
	return strings.Join(g.Folders, ", ")
}

// Tool is one loaded definition.
type Tool struct {
	Name        string
	Description string
	Guidance    string // the Markdown body
	Command     []string
	Schema      json.RawMessage // input_schema as JSON, as the model is given it
	Groups      Groups
	Timeout     time.Duration
	MaxOutput   int
	Env         []string
	// Approval is who must wait for the owner's press before a call runs
	// (DESIGN.md, "Approvals"): ApprovalNever, ApprovalGroups, ApprovalAlways.
	Approval string
	File     string // where it was defined

	schema   *jsonschema.Schema
	defaults map[string]any // top-level property defaults
}

// frontMatter is the YAML head of a tool file; unknown keys are errors.
type frontMatter struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Command     []string  `yaml:"command"`
	InputSchema yaml.Node `yaml:"input_schema"`
	Groups      yaml.Node `yaml:"groups"`
	Timeout     string    `yaml:"timeout"`
	MaxOutput   *int      `yaml:"max_output"`
	Env         []string  `yaml:"env"`
	Approval    string    `yaml:"approval"`
}

var (
	nameRe        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	envRe         = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholderRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// Parse reads one tool file's content; file names it in errors and
// resolves a relative command against its directory.
func Parse(file string, data []byte) (*Tool, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	head, body, err := splitFrontMatter(data)
	if err != nil {
		return nil, err
	}
	var fm frontMatter
	dec := yaml.NewDecoder(bytes.NewReader(head))
	dec.KnownFields(true)
	if err := dec.Decode(&fm); err != nil {
		return nil, fmt.Errorf("front matter: %w", err)
	}
	t := &Tool{Name: fm.Name, Description: strings.TrimSpace(fm.Description), Guidance: strings.TrimSpace(string(body)), File: file,
		Timeout: DefaultTimeout, MaxOutput: DefaultMaxOutput, Env: fm.Env}
	switch {
	case !nameRe.MatchString(t.Name):
		return nil, fmt.Errorf("name %q: want a letter, then up to 63 letters, digits, _ or -", t.Name)
	case slices.Contains(Builtins, t.Name):
		return nil, fmt.Errorf("name %q shadows a built-in tool", t.Name)
	case t.Description == "":
		return nil, errors.New("description is required")
	}
	if fm.Timeout != "" {
		if t.Timeout, err = time.ParseDuration(fm.Timeout); err != nil || t.Timeout <= 0 || t.Timeout > MaxTimeout {
			return nil, fmt.Errorf("timeout %q: want a Go duration above 0 and at most %s", fm.Timeout, MaxTimeout)
		}
	}
	if fm.MaxOutput != nil {
		if *fm.MaxOutput <= 0 || *fm.MaxOutput > MaxMaxOutput {
			return nil, fmt.Errorf("max_output %d: want 1 to %d bytes", *fm.MaxOutput, MaxMaxOutput)
		}
		t.MaxOutput = *fm.MaxOutput
	}
	for _, e := range fm.Env {
		if !envRe.MatchString(e) {
			return nil, fmt.Errorf("env %q is not a variable name", e)
		}
	}
	switch t.Approval = fm.Approval; t.Approval {
	case "":
		t.Approval = ApprovalNever
	case ApprovalNever, ApprovalGroups, ApprovalAlways:
	default:
		return nil, fmt.Errorf("approval %q: want never, groups or always", fm.Approval)
	}
	if t.Groups, err = parseGroups(fm.Groups); err != nil {
		return nil, err
	}
	if err := t.compileSchema(fm.InputSchema); err != nil {
		return nil, err
	}
	if err := t.checkCommand(fm.Command, filepath.Dir(file)); err != nil {
		return nil, err
	}
	return t, nil
}

// splitFrontMatter cuts "---\n<yaml>\n---\n<body>".
func splitFrontMatter(data []byte) (head, body []byte, err error) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, nil, errors.New("does not start with a --- line (YAML front matter)")
	}
	if h, b, ok := bytes.Cut(rest, []byte("\n---\n")); ok {
		return h, b, nil
	}
	if h, ok := bytes.CutSuffix(bytes.TrimRight(rest, "\n"), []byte("\n---")); ok {
		return h, nil, nil
	}
	return nil, nil, errors.New("front matter has no closing --- line")
}

// parseGroups reads main (the default), all, or a list of folders.
func parseGroups(n yaml.Node) (Groups, error) {
	switch n.Kind {
	case 0:
		return Groups{Folders: []string{domain.MainFolder}}, nil
	case yaml.ScalarNode:
		switch n.Value {
		case "all":
			return Groups{All: true}, nil
		case domain.MainFolder:
			return Groups{Folders: []string{domain.MainFolder}}, nil
		}
		return Groups{}, fmt.Errorf("groups %q: want main, all or a list of folders", n.Value)
	case yaml.SequenceNode:
		var fs []string
		if err := n.Decode(&fs); err != nil {
			return Groups{}, fmt.Errorf("groups: %w", err)
		}
		for _, f := range fs {
			if err := domain.ValidateFolder(f); err != nil && f != domain.MainFolder {
				return Groups{}, fmt.Errorf("groups: %w", err)
			}
		}
		if len(fs) == 0 {
			return Groups{}, errors.New("groups: an empty list lets nobody call the tool; leave groups out for main")
		}
		return Groups{Folders: fs}, nil
	}
	return Groups{}, errors.New("groups: want main, all or a list of folders")
}

// compileSchema takes input_schema (default: an object with no
// properties), which must describe an object, compiles it as JSON Schema
// 2020-12 and keeps the top-level defaults.
func (t *Tool) compileSchema(n yaml.Node) error {
	doc := map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
	if n.Kind != 0 {
		doc = nil
		if err := n.Decode(&doc); err != nil || doc == nil {
			return fmt.Errorf("input_schema: want a mapping: %v", err)
		}
	}
	if doc["type"] != "object" {
		return errors.New(`input_schema: type must be "object" (the arguments are a JSON object)`)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	// Through JSON again, as the validator wants its numbers.
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{}) // a $ref never reads a file or the network
	if err := c.AddResource("tool.json", v); err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	if t.schema, err = c.Compile("tool.json"); err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	t.Schema = raw
	t.defaults = map[string]any{}
	if props, ok := v.(map[string]any)["properties"].(map[string]any); ok {
		for name, p := range props {
			if pm, ok := p.(map[string]any); ok {
				if d, ok := pm["default"]; ok {
					// In argv's form, as the arguments it stands in for.
					if t.defaults[name], err = canonicalNumbers(d); err != nil {
						return fmt.Errorf("input_schema: default of %s: %w", name, err)
					}
				}
			}
		}
	}
	return nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: tool schemas may not refer to other documents", url)
}

// checkCommand checks the argv: a program (absolute, or relative to the
// tools dir) without placeholders, then elements whose {placeholders} each
// name a scalar property that is required or has a default, so every
// element is always filled.
func (t *Tool) checkCommand(argv []string, dir string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("command is required: a list, program first")
	}
	if len(argv) > maxArgv {
		return fmt.Errorf("command has more than %d elements", maxArgv)
	}
	if placeholderRe.MatchString(argv[0]) {
		return errors.New("command: the program may not be a placeholder")
	}
	t.Command = slices.Clone(argv)
	if !filepath.IsAbs(argv[0]) {
		t.Command[0] = filepath.Join(dir, argv[0])
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(t.Schema, &s); err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	for _, el := range argv[1:] {
		for _, m := range placeholderRe.FindAllStringSubmatch(el, -1) {
			name := m[1]
			p, ok := s.Properties[name]
			if !ok {
				return fmt.Errorf("command: placeholder {%s} names no property of input_schema", name)
			}
			if typ, _ := p.Type.(string); typ != "string" && typ != "integer" && typ != "number" && typ != "boolean" {
				return fmt.Errorf("command: placeholder {%s} must be a property of type string, integer, number or boolean", name)
			}
			if _, ok := t.defaults[name]; !ok && !slices.Contains(s.Required, name) {
				return fmt.Errorf("command: placeholder {%s} must be required or have a default, so that it is always filled", name)
			}
		}
	}
	return nil
}
