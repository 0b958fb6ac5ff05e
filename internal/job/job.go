// Package job is the wire protocol between the host and the agent runner in a
// sandbox: one JSON Job on stdin, JSON-lines Events on stdout.
package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version the host writes and the agent accepts.
const Version = 1

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
}

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

// Decode reads and validates one Job from r.
func Decode(r io.Reader) (Job, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxJobBytes+1))
	if err != nil {
		return Job{}, fmt.Errorf("read job: %w", err)
	}
	if len(data) > MaxJobBytes {
		return Job{}, fmt.Errorf("job larger than %d bytes", MaxJobBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j Job
	if err := dec.Decode(&j); err != nil {
		return Job{}, fmt.Errorf("decode job: %w", err)
	}
	if dec.More() {
		return Job{}, errors.New("decode job: trailing data after the job object")
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	return j, nil
}

// Validate checks the fields the agent relies on.
func (j Job) Validate() error {
	switch {
	case j.Version != Version:
		return fmt.Errorf("job version %d, want %d", j.Version, Version)
	case j.Group == "":
		return errors.New("job has no group")
	case j.Prompt == "":
		return errors.New("job has no prompt")
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
