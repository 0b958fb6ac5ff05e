package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSandboxUserFrom(t *testing.T) {
	const passwd = `root:x:0:0:root:/root:/bin/bash
cloudsdk:x:1000:1000::/home/cloudsdk:/bin/bash
clawpen-sandbox:x:999:995::/nonexistent:/usr/sbin/nologin
old-style:x:998:998::/nonexistent:/bin/false
noshell:x:997:997::/nonexistent:
rootgroup:x:996:0::/nonexistent:/usr/sbin/nologin
alias0:x:0:996::/nonexistent:/usr/sbin/nologin
broken:x:abc:1::/nonexistent:/usr/sbin/nologin
short:x:5
`
	tests := []struct {
		name     string
		uid, gid int
		err      string // "" = accepted
	}{
		{name: "clawpen-sandbox", uid: 999, gid: 995},
		{name: "old-style", uid: 998, gid: 998},
		{name: "cloudsdk", err: `login shell "/bin/bash"`},
		{name: "noshell", err: `login shell ""`},
		{name: "root", err: "must not be root"},
		{name: "alias0", err: "must not be root"},
		{name: "rootgroup", err: "must not be root"},
		{name: "broken", err: "malformed"},
		{name: "short", err: "no such user"},
		{name: "missing", err: "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin missing"},
		{name: "", err: "not a user name"},
		{name: "a:b", err: "not a user name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, gid, err := sandboxUserFrom(strings.NewReader(passwd), tt.name)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.Equal(t, [2]int{-1, -1}, [2]int{uid, gid})
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [2]int{tt.uid, tt.gid}, [2]int{uid, gid})
		})
	}
}
