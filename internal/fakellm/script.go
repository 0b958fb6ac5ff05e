package fakellm

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The script. The "prompt" is the text of the last user message that is not a
// tool_result, HTML-unescaped (the host escapes user text). Directive lines in it:
//
//	TOOL <name> <json-object>   call a tool; several run in order, one per turn
//	SLEEP <duration>            wait that long before the first answer to this prompt
//	REPLY <text>                the final answer is exactly <text> (to the line end;
//	                            a trailing closing tag of the host's format is dropped)
//	REPLY_LONG <n>              the final answer is n characters of paragraphs
//	DRIP <duration>             a streamed answer waits that long between its
//	                            chunks (a slow model writing)
//	USAGE <input> <output>      every answer to this prompt reports these token
//	                            counts (else input is the prompt's length / 4,
//	                            output the answer's)
//
// A summary request (clawpen-agent's compaction: the prompt starts with
// "<conversation>") runs no directive: its answer is "Summary of the
// earlier conversation. Facts: " and every distinct FACT-<word> in it, in
// order, so a test sees which facts the summary kept.
//
// Directives may sit inside other text on a line. While fewer tool_results than
// TOOL directives follow the prompt, the answer is a tool_use for the next one;
// then the final text: REPLY / REPLY_LONG if given, else "results:\n" and each
// tool_result's text on its own line, or, without directives, "echo: <prompt>".
var (
	toolRe  = regexp.MustCompile(`TOOL\s+(\w+)\s+(\{.*\})`)
	sleepRe = regexp.MustCompile(`\bSLEEP\s+(\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))`)
	replyRe = regexp.MustCompile(`\bREPLY\s+(.*)$`)
	longRe  = regexp.MustCompile(`\bREPLY_LONG\s+(\d+)`)
	usageRe = regexp.MustCompile(`\bUSAGE\s+(\d{1,12})\s+(\d{1,12})\b`)
	dripRe  = regexp.MustCompile(`\bDRIP\s+(\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))`)
)

const (
	maxSleep = 10 * time.Minute
	maxLong  = 1 << 20
)

type toolCall struct {
	name  string
	input json.RawMessage
}

// answer is what the server replies: a tool call, or final text.
type answer struct {
	tool  *toolCall
	toolN int // 1-based number of the tool call within the prompt, for ids
	text  string
	sleep time.Duration
	drip  time.Duration // between streamed chunks
	// firstText, when set, is told when the first text chunk was flushed.
	firstText func(at time.Time)
	inToks    int
	// outToks, when set, replaces the output tokens reckoned from the answer.
	outToks int
}

type directives struct {
	tools    []toolCall
	sleep    time.Duration
	drip     time.Duration
	reply    *string
	longN    int
	hasReply bool
	usage    *[2]int // USAGE: input and output tokens
}

// closingTag is the host's element ends after a directive (</message>,
// </scheduled_task>; </transcript></attachment></message> after a
// transcript's).
var closingTag = regexp.MustCompile(`(</(?:messages?|scheduled_task|transcript|attachment)>)+$`)

func parseDirectives(prompt string) (directives, error) {
	var d directives
	for _, line := range strings.Split(prompt, "\n") {
		if m := toolRe.FindStringSubmatch(line); m != nil {
			in, err := firstObject(m[2])
			if err != nil {
				return d, fmt.Errorf("fakellm: TOOL %s directive has an invalid JSON object %q: %w", m[1], m[2], err)
			}
			d.tools = append(d.tools, toolCall{name: m[1], input: in})
		}
		if m := usageRe.FindStringSubmatch(line); m != nil {
			in, _ := strconv.Atoi(m[1]) // at most 12 digits: always fits
			out, _ := strconv.Atoi(m[2])
			d.usage = &[2]int{in, out}
		}
		if m := sleepRe.FindStringSubmatch(line); m != nil {
			if dur, err := time.ParseDuration(m[1]); err == nil {
				d.sleep = min(dur, maxSleep)
			}
		}
		if m := dripRe.FindStringSubmatch(line); m != nil {
			if dur, err := time.ParseDuration(m[1]); err == nil {
				d.drip = min(dur, maxSleep)
			}
		}
		if m := longRe.FindStringSubmatch(line); m != nil && !d.hasReply {
			n, err := strconv.Atoi(m[1])
			if err == nil {
				d.longN, d.hasReply = min(n, maxLong), true
			}
		} else if m := replyRe.FindStringSubmatch(line); m != nil && !d.hasReply {
			text := closingTag.ReplaceAllString(strings.TrimRight(m[1], " \t\r"), "")
			d.reply, d.hasReply = &text, true
		}
	}
	return d, nil
}

// firstObject takes the greedy match when it is one JSON object, else the
// first JSON object it starts with (text after the object on the same line).
func firstObject(s string) (json.RawMessage, error) {
	var obj map[string]any
	err := json.Unmarshal([]byte(s), &obj)
	if err == nil {
		return json.RawMessage(s), nil
	}
	var raw json.RawMessage
	if json.NewDecoder(strings.NewReader(s)).Decode(&raw) == nil && json.Unmarshal(raw, &obj) == nil {
		return raw, nil
	}
	return nil, err
}

// plan decides the next answer from the conversation so far.
func plan(msgs []Message) (answer, error) {
	promptIdx := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && isPrompt(msgs[i]) {
			promptIdx = i
			break
		}
	}
	if promptIdx < 0 {
		return answer{}, errNoPrompt
	}
	prompt := html.UnescapeString(msgs[promptIdx].Text())
	if isSummary(msgs) {
		return answer{text: summarise(prompt), inToks: len(prompt)/4 + 1}, nil
	}
	d, err := parseDirectives(prompt)
	if err != nil {
		return answer{}, err
	}
	var results []string
	for _, m := range msgs[promptIdx+1:] {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				results = append(results, b.Content)
			}
		}
	}
	ans := answer{inToks: len(prompt)/4 + 1, drip: d.drip}
	if d.usage != nil {
		ans.inToks, ans.outToks = d.usage[0], d.usage[1]
	}
	if len(results) == 0 {
		ans.sleep = d.sleep
	}
	if len(results) < len(d.tools) {
		tc := d.tools[len(results)]
		ans.tool, ans.toolN = &tc, len(results)+1
		return ans, nil
	}
	switch {
	case d.reply != nil:
		ans.text = *d.reply
	case d.hasReply:
		ans.text = longText(d.longN)
	case len(d.tools) > 0:
		ans.text = "results:\n" + strings.Join(results, "\n")
	default:
		ans.text = "echo: " + prompt
	}
	return ans, nil
}

func isPrompt(m Message) bool {
	hasText := false
	for _, b := range m.Content {
		switch b.Type {
		case "tool_result":
			return false
		case "text":
			hasText = true
		}
	}
	return hasText
}

// longText is exactly n characters of paragraphs; it neither starts nor ends
// with white space, so trimming by a client does not change it.
func longText(n int) string {
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	for p := 1; b.Len() < n; p++ {
		if p > 1 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Paragraph %d.", p)
		for s := 1; s <= 8; s++ {
			fmt.Fprintf(&b, " Sentence %d of paragraph %d says nothing in particular, at some length.", s, p)
		}
	}
	out := []byte(b.String()[:n])
	if last := out[n-1]; last == ' ' || last == '\n' {
		out[n-1] = '.'
	}
	return string(out)
}

var factRe = regexp.MustCompile(`\bFACT-\w+`)

// summarise is the fake's summary of a conversation: the facts in it.
func summarise(conversation string) string {
	var facts []string
	seen := map[string]bool{}
	for _, f := range factRe.FindAllString(conversation, -1) {
		if !seen[f] {
			seen[f] = true
			facts = append(facts, f)
		}
	}
	return "Summary of the earlier conversation. Facts: " + strings.Join(facts, " ")
}

// isSummary reports whether msgs are a summary request: one prompt that
// starts with "<conversation>".
func isSummary(msgs []Message) bool {
	return len(msgs) == 1 && strings.HasPrefix(msgs[0].Text(), "<conversation>")
}
