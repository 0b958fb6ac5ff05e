package domain

// Sender policies: which members of a group may call the agent, and how
// often. A group's policy is JSON: {"allow": "*" | [user ids], "mode":
// "trigger" | "drop", "rate": "N/h"}. With mode "trigger", messages of
// members not allowed are kept as context but never call the agent; with
// "drop" they are not stored at all. A rate bounds each member's calls per
// hour (CLAWPEN_SENDER_RATE when the policy sets none); "allow" may be left
// out of a policy that sets only a rate.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Sender policy modes.
const (
	SenderModeTrigger = "trigger"
	SenderModeDrop    = "drop"
)

// SenderPolicy is a parsed sender policy.
type SenderPolicy struct {
	All   bool
	Users map[int64]bool
	Mode  string
	// Rate is the calls per member and hour the policy sets (0: no limit),
	// when RateSet; else the host's CLAWPEN_SENDER_RATE applies.
	Rate    int
	RateSet bool
}

// DefaultSenderPolicy lets every member call the agent.
var DefaultSenderPolicy = SenderPolicy{All: true, Mode: SenderModeTrigger}

// closedSenderPolicy is what a malformed policy means: nobody but the owner
// calls the agent, and messages are still kept as context.
var closedSenderPolicy = SenderPolicy{Users: map[int64]bool{}, Mode: SenderModeTrigger}

type senderPolicyWire struct {
	Allow jsontext.Value `json:"allow"`
	Mode  string         `json:"mode"`
	Rate  *string        `json:"rate"`
}

// Parse reads a policy; empty means def. A malformed policy returns a
// closedSenderPolicy policy together with the error, so callers can fail closedSenderPolicy and log.
func ParseSenderPolicy(raw []byte, def SenderPolicy) (SenderPolicy, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return def, nil
	}
	var w senderPolicyWire
	if err := json.Unmarshal(raw, &w, json.RejectUnknownMembers(true)); err != nil {
		return closedSenderPolicy, fmt.Errorf("sender policy: %w", err)
	}
	p := SenderPolicy{Mode: w.Mode}
	if w.Rate != nil {
		n, err := ParseSenderRate(*w.Rate)
		if err != nil {
			return closedSenderPolicy, fmt.Errorf("sender policy: rate: %w", err)
		}
		p.Rate, p.RateSet = n, true
		if len(w.Allow) == 0 {
			w.Allow = jsontext.Value(`"*"`)
		}
	}
	switch p.Mode {
	case "":
		p.Mode = SenderModeTrigger
	case SenderModeTrigger, SenderModeDrop:
	default:
		return closedSenderPolicy, fmt.Errorf("sender policy: mode %q, want trigger or drop", w.Mode)
	}
	var star string
	var ids []int64
	switch {
	case len(w.Allow) == 0:
		return closedSenderPolicy, errors.New(`sender policy: "allow" is required: "*" or a list of user ids`)
	case json.Unmarshal(w.Allow, &star) == nil:
		if star != "*" {
			return closedSenderPolicy, fmt.Errorf(`sender policy: allow %q, want "*" or a list of user ids`, star)
		}
		p.All = true
	case json.Unmarshal(w.Allow, &ids) == nil:
		p.Users = make(map[int64]bool, len(ids))
		for _, id := range ids {
			if id <= 0 {
				return closedSenderPolicy, fmt.Errorf("sender policy: user id %d is not a Telegram user id", id)
			}
			p.Users[id] = true
		}
	default:
		return closedSenderPolicy, errors.New(`sender policy: allow must be "*" or a list of user ids`)
	}
	return p, nil
}

// MaxSenderRate bounds a rate: more calls an hour than this is no limit
// worth keeping, and a typo.
const MaxSenderRate = 10000

// ParseSenderRate reads a rate of calls per member and hour: "N/h", or "0"
// for no limit.
func ParseSenderRate(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "/h"))
	if err != nil || !strings.HasSuffix(s, "/h") || n < 0 || n > MaxSenderRate {
		return 0, fmt.Errorf("%q: want calls per hour as N/h (at most %d), or 0 for no limit", s, MaxSenderRate)
	}
	return n, nil
}

// SenderVerdict says what to do with one member's message.
type SenderVerdict struct {
	Store      bool // keep it as context
	MayTrigger bool // it may call the agent
}

// Decide applies p to a message from sender; the owner is always allowed.
func (p SenderPolicy) Decide(sender, owner int64) SenderVerdict {
	if p.All || p.Users[sender] || (owner != 0 && sender == owner) {
		return SenderVerdict{Store: true, MayTrigger: true}
	}
	return SenderVerdict{Store: p.Mode != SenderModeDrop}
}
