// Package command parses the owner's slash commands ("/register -100123 family
// Family chat"). Parsing is pure; the host decides what a command does.
package command

import (
	"errors"
	"strings"
	"unicode"
)

// Command is a parsed slash command.
type Command struct {
	Name string   // without the slash and without an "@botname" suffix, lower-case
	Args []string // split on spaces; double quotes group words ("0 9 * * *")
	Rest string   // everything after the name, trimmed, unsplit
}

// ErrNotCommand means the text does not start with '/'.
var ErrNotCommand = errors.New("not a command")

// Parse splits text into a command. botUsername, when given, lets
// "/groups@my_bot" match while "/groups@other_bot" is not for us.
func Parse(text, botUsername string) (Command, error) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") || len(text) < 2 {
		return Command{}, ErrNotCommand
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexFunc(head, unicode.IsSpace); i >= 0 {
		head, rest = head[:i], head[i:]+" "+rest
	}
	name, target, hasTarget := strings.Cut(head, "@")
	if hasTarget && botUsername != "" && !strings.EqualFold(target, botUsername) {
		return Command{}, ErrNotCommand
	}
	if name == "" {
		return Command{}, ErrNotCommand
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return Command{}, ErrNotCommand
		}
	}
	rest = strings.TrimSpace(rest)
	args, err := split(rest)
	if err != nil {
		return Command{}, err
	}
	return Command{Name: strings.ToLower(name), Args: args, Rest: rest}, nil
}

// split breaks s on white space, keeping "double quoted" runs together.
func split(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case unicode.IsSpace(r) && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if inQuote {
		return nil, errors.New("unclosed double quote")
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}
