package domain

// The wire protocol between the host and the agent runner in a sandbox: one
// JSON Job on stdin, JSON-lines Events on stdout, and the paths where the
// agent finds its world. clawpen-agent links this package and nothing else
// of the host.

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Paths inside every sandbox (DESIGN.md, "Sandbox contract"): the backends
// build them, the agent finds its world there.
const (
	GroupPath  = "/workspace/group"
	GlobalPath = "/workspace/global"
	ExtraPath  = "/workspace/extra" // + "/<name>"
	HomePath   = "/home/agent"
	SocketPath = "/run/clawpen/host.sock"
	// CABundlePath is where a sandbox whose profile holds credentials
	// finds the roots it trusts: the system's and its run's CA.
	CABundlePath = "/run/clawpen/ca-certificates.crt"
	// EgressProxyAddr is where clawpen-agent listens, in the sandbox's own
	// network namespace, when the job has Egress; HTTP_PROXY points there.
	EgressProxyAddr = "127.0.0.1:3128"
	// GatewayCredentialHeader carries an invocation's credential to the
	// host's TLS gateway (internal/gateway), which is how a sandbox on
	// another machine reaches the host socket's routes.
	GatewayCredentialHeader = "Clawpen-Credential"
)

// JobVersion is the protocol version the host writes and the agent accepts.
const JobVersion = 1

// MaxJobBytes caps the job the agent will read from stdin.
const MaxJobBytes = 4 << 20

// Job is what the host asks one agent invocation to do.
type Job struct {
	Version       int    `json:"v"`
	Group         string `json:"group"`   // folder of the group the agent acts for
	ChatID        int64  `json:"chat_id"` // the group's chat
	IsMain        bool   `json:"is_main"`
	AssistantName string `json:"assistant_name"`
	Provider      string `json:"provider"` // "anthropic" (default) or "openai"
	Model         string `json:"model"`
	MaxTokens     int    `json:"max_tokens,omitempty"`
	MaxTurns      int    `json:"max_turns,omitempty"`
	ContextMode   string `json:"context_mode"` // "group" resumes the session, "isolated" starts fresh
	Prompt        string `json:"prompt"`       // formatted, escaped messages or a task prompt
	TaskID        int64  `json:"task_id,omitempty"`
	// Egress: the group's profile has network, so the agent relays
	// EgressProxyAddr to the host socket, whose egress proxy checks every
	// connection. False: nothing listens there.
	Egress bool `json:"egress,omitempty"`
	// Tools are the host bridge tools the group may call, offered to the
	// model under their own names; the host checks every call again.
	Tools []JobTool `json:"tools,omitempty"`
	// ContextTokens is the size, estimated (EstimateTokens), past which
	// the conversation is compacted (CLAWPEN_CONTEXT_TOKENS); 0 is
	// DefaultContextTokens.
	ContextTokens int64 `json:"context_tokens,omitempty"`
	// Archived: the host archived the transcript before this run, because
	// the conversation may pass ContextTokens in it. Only then may the
	// agent replace older turns with their summary: no turn is dropped
	// that the archive does not hold.
	Archived bool `json:"archived,omitempty"`
}

// DefaultContextTokens is CLAWPEN_CONTEXT_TOKENS' default.
const DefaultContextTokens = 100000

// EstimateTokens is how many tokens n bytes of conversation are reckoned
// to be: one in four bytes, the providers' own rule of thumb for English.
func EstimateTokens(n int64) int64 { return (n + 3) / 4 }

// Bounds of the agent's system prompt, which the host adds to what it
// reckons a run's conversation to be: the fixed instructions, and each of
// the two MEMORY.md files it reads (global, the group's).
const (
	MaxInstructionBytes = 4 << 10
	MaxMemoryBytes      = 32 << 10
)

// JobTool is a bridge tool as the agent offers it to the model.
type JobTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Guidance    string         `json:"guidance,omitempty"` // the definition's Markdown body
	InputSchema jsontext.Value `json:"input_schema"`       // JSON Schema of the arguments object
}

// Files the agent keeps in its home, the group's session dir on the host:
// the conversation a group-context run resumes, and one set aside when it
// could not be read. The host's /new removes both.
const (
	TranscriptFile       = "transcript.json"
	BrokenTranscriptFile = TranscriptFile + ".broken"
)

// Event types written by the agent, one JSON object per line.
const (
	EventReady    = "ready"    // first line, as soon as the agent runs
	EventProgress = "progress" // optional, free text
	EventResult   = "result"   // the final answer (internal text already removed)
	EventError    = "error"    // the run failed
)

// Event is one line of agent output.
type Event struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

// DecodeJob reads and validates one Job from r.
func DecodeJob(r io.Reader) (Job, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxJobBytes+1))
	if err != nil {
		return Job{}, fmt.Errorf("read job: %w", err)
	}
	if len(data) > MaxJobBytes {
		return Job{}, fmt.Errorf("job larger than %d bytes", MaxJobBytes)
	}
	var j Job
	if err := json.Unmarshal(data, &j, json.RejectUnknownMembers(true)); err != nil {
		return Job{}, fmt.Errorf("decode job: %w", err)
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	return j, nil
}

// Validate checks the fields the agent relies on.
func (j Job) Validate() error {
	switch {
	case j.Version != JobVersion:
		return fmt.Errorf("job version %d, want %d", j.Version, JobVersion)
	case j.Group == "":
		return errors.New("job has no group")
	case j.Prompt == "":
		return errors.New("job has no prompt")
	case j.Model == "":
		// The host always names it (config.Model): one default, in one place.
		return errors.New("job names no model")
	case j.ContextMode != "group" && j.ContextMode != "isolated":
		return fmt.Errorf("job context_mode %q, want group or isolated", j.ContextMode)
	case j.Provider != "" && j.Provider != "anthropic" && j.Provider != "openai":
		return fmt.Errorf("job provider %q, want anthropic or openai", j.Provider)
	}
	return nil
}

// ParseEvent decodes one line of agent output. Unknown types are an error so
// garbage printed by a broken agent is never mistaken for an answer.
func ParseEvent(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, fmt.Errorf("agent output is not a JSON event: %w", err)
	}
	switch e.Type {
	case EventReady, EventProgress, EventResult, EventError:
		return e, nil
	default:
		return Event{}, fmt.Errorf("agent output has unknown event type %q", e.Type)
	}
}
