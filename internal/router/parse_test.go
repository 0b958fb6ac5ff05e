package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommand(t *testing.T) {
	cases := []struct {
		in      string
		name    string
		args    []string
		wantErr error
	}{
		{"/groups", "groups", nil, nil},
		{"/Groups@andy_bot", "groups", nil, nil},
		{"/groups@other_bot", "", nil, errNotCommand},
		{"/register -1001 family Family Chat", "register", []string{"-1001", "family", "Family", "Chat"}, nil},
		{`/schedule main cron "0 9 * * *" say hi`, "schedule", []string{"main", "cron", "0 9 * * *", "say", "hi"}, nil},
		{"hello", "", nil, errNotCommand},
		{"/", "", nil, errNotCommand},
		{"/ register", "", nil, errNotCommand},
		{"/pair\tABC123", "pair", []string{"ABC123"}, nil},
		{"/über", "", nil, errNotCommand},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			cmd, err := parseCommand(c.in, "andy_bot")
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.name, cmd.Name)
			assert.Equal(t, c.args, cmd.Args)
		})
	}
	_, err := parseCommand(`/schedule main cron "0 9`, "")
	assert.ErrorContains(t, err, "unclosed")
}

func FuzzParseCommand(f *testing.F) {
	f.Add(`/schedule main cron "0 9 * * *" hi`)
	f.Add("/x@y z")
	f.Fuzz(func(t *testing.T, s string) {
		cmd, err := parseCommand(s, "bot")
		if err == nil {
			assert.NotEmpty(t, cmd.Name)
		}
	})
}
