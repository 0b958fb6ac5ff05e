package router

// The owner's slash commands ("/register -100123 family Family chat") are
// parsed purely here; what a command does is in commands.go.

import (
	"errors"
	"strings"
	"unicode"
)

// slashCommand is a parsed slash command.
type slashCommand struct {
	Name string   // without the slash and without an "@botname" suffix, lower-case
	Args []string // split on spaces; double quotes group words ("0 9 * * *")
}

// errNotCommand means the text does not start with '/'.
var errNotCommand = errors.New("not a command")

// parseCommand splits text into a command. botUsername, when given, lets
// "/groups@my_bot" match while "/groups@other_bot" is not for us.
func parseCommand(text, botUsername string) (slashCommand, error) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") || len(text) < 2 {
		return slashCommand{}, errNotCommand
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexFunc(head, unicode.IsSpace); i >= 0 {
		head, rest = head[:i], head[i:]+" "+rest
	}
	name, target, hasTarget := strings.Cut(head, "@")
	if hasTarget && botUsername != "" && !strings.EqualFold(target, botUsername) {
		return slashCommand{}, errNotCommand
	}
	if name == "" {
		return slashCommand{}, errNotCommand
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return slashCommand{}, errNotCommand
		}
	}
	rest = strings.TrimSpace(rest)
	args, err := splitArgs(rest)
	if err != nil {
		return slashCommand{}, err
	}
	return slashCommand{Name: strings.ToLower(name), Args: args}, nil
}

// splitArgs breaks s on white space, keeping "double quoted" runs together.
func splitArgs(s string) ([]string, error) {
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
