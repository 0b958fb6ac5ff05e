// Package policy decides which members of a group may call the agent.
// A group's policy is JSON: {"allow": "*" | [user ids], "mode": "trigger" | "drop"}.
// With mode "trigger", messages of members not allowed are kept as context
// but never call the agent; with "drop" they are not stored at all.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Modes.
const (
	ModeTrigger = "trigger"
	ModeDrop    = "drop"
)

// Policy is a parsed sender policy.
type Policy struct {
	All   bool
	Users map[int64]bool
	Mode  string
}

// Default lets every member call the agent.
var Default = Policy{All: true, Mode: ModeTrigger}

// closed is what a malformed policy means: nobody but the owner calls the
// agent, and messages are still kept as context.
var closed = Policy{Users: map[int64]bool{}, Mode: ModeTrigger}

type wire struct {
	Allow json.RawMessage `json:"allow"`
	Mode  string          `json:"mode"`
}

// Parse reads a policy; empty means def. A malformed policy returns a
// closed policy together with the error, so callers can fail closed and log.
func Parse(raw []byte, def Policy) (Policy, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return def, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var w wire
	if err := dec.Decode(&w); err != nil {
		return closed, fmt.Errorf("sender policy: %w", err)
	}
	if dec.More() {
		return closed, errors.New("sender policy: data after the JSON object")
	}
	p := Policy{Mode: w.Mode}
	switch p.Mode {
	case "":
		p.Mode = ModeTrigger
	case ModeTrigger, ModeDrop:
	default:
		return closed, fmt.Errorf("sender policy: mode %q, want trigger or drop", w.Mode)
	}
	var star string
	var ids []int64
	switch {
	case len(w.Allow) == 0:
		return closed, errors.New(`sender policy: "allow" is required: "*" or a list of user ids`)
	case json.Unmarshal(w.Allow, &star) == nil:
		if star != "*" {
			return closed, fmt.Errorf(`sender policy: allow %q, want "*" or a list of user ids`, star)
		}
		p.All = true
	case json.Unmarshal(w.Allow, &ids) == nil:
		p.Users = make(map[int64]bool, len(ids))
		for _, id := range ids {
			if id <= 0 {
				return closed, fmt.Errorf("sender policy: user id %d is not a Telegram user id", id)
			}
			p.Users[id] = true
		}
	default:
		return closed, errors.New(`sender policy: allow must be "*" or a list of user ids`)
	}
	return p, nil
}

// Verdict says what to do with one member's message.
type Verdict struct {
	Store      bool // keep it as context
	MayTrigger bool // it may call the agent
}

// Decide applies p to a message from sender; the owner is always allowed.
func (p Policy) Decide(sender, owner int64) Verdict {
	if p.All || p.Users[sender] || (owner != 0 && sender == owner) {
		return Verdict{Store: true, MayTrigger: true}
	}
	return Verdict{Store: p.Mode != ModeDrop}
}
