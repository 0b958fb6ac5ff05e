package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A wrong command line exits 2 before anything is measured, naming the bad
// part, with the usage after it.
func TestWrongCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs"}, "flag needs an argument: -runs"},
		{[]string{"--runs", "many"}, `invalid value "many" for flag -runs`},
		{[]string{"--runs", "-1"}, "--runs -1"},
		{[]string{"--frob"}, "flag provided but not defined: -frob"},
		{[]string{"--only", "sandbox,frob"}, `unknown section "frob"`},
		{[]string{"--quick", "sandbox"}, `unexpected argument "sandbox"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			getenv := func(string) string { t.Fatal("read the configuration of a wrong command line"); return "" }
			code := run(context.Background(), tc.args, &stdout, &stderr, getenv)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.Contains(t, stderr.String(), "Usage: clawpen-bench")
			assert.Empty(t, stdout.String(), "the report's output")
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{arg}, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, 0, code, arg)
		for _, flag := range []string{"-json", "-quick", "-runs N", "-cpuprofile file", "-only sections", "sandbox,overhead,inbound,store,footprint,scaling"} {
			assert.Contains(t, stdout.String(), flag, arg)
		}
		assert.Empty(t, stderr.String(), arg)
	}
}
