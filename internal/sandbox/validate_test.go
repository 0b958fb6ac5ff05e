package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{GroupDir: "/g"}
	tests := []struct {
		name string
		mod  func(*Spec)
		want string
	}{
		{"valid", func(*Spec) {}, ""},
		{"valid full", func(s *Spec) {
			s.GlobalDir, s.SessionDir, s.SocketPath = "/gl", "/s", "/sock"
			s.Env = map[string]string{"A_1": "x", "_b": ""}
			s.Extra = []Mount{{HostPath: "/x", Name: "x"}, {HostPath: "/y", Name: "y.z-1"}}
		}, ""},
		{"no group", func(s *Spec) { s.GroupDir = "" }, "no GroupDir"},
		{"relative group", func(s *Spec) { s.GroupDir = "groups/x" }, "not an absolute path"},
		{"relative global", func(s *Spec) { s.GlobalDir = "global" }, "not an absolute path"},
		{"relative session", func(s *Spec) { s.SessionDir = "sess" }, "not an absolute path"},
		{"relative socket", func(s *Spec) { s.SocketPath = "x.sock" }, "not an absolute path"},
		{"empty env name", func(s *Spec) { s.Env = map[string]string{"": "x"} }, "invalid environment variable name"},
		{"bad env name", func(s *Spec) { s.Env = map[string]string{"A=B": "x"} }, "invalid environment variable name"},
		{"digit env name", func(s *Spec) { s.Env = map[string]string{"1A": "x"} }, "invalid environment variable name"},
		{"non-ascii env name", func(s *Spec) { s.Env = map[string]string{"Ä": "x"} }, "invalid environment variable name"},
		{"nul env value", func(s *Spec) { s.Env = map[string]string{"A": "x\x00y"} }, "contains NUL"},
		{"extra empty", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: ""}} }, "invalid extra mount name"},
		{"extra dot", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "."}} }, "invalid extra mount name"},
		{"extra dotdot", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: ".."}} }, "invalid extra mount name"},
		{"extra escape", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "../escape"}} }, "invalid extra mount name"},
		{"extra slash", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "a/b"}} }, "invalid extra mount name"},
		{"extra nul", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "a\x00b"}} }, "invalid extra mount name"},
		{"extra colon", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "a:b"}} }, "invalid extra mount name"},
		{"extra comma", func(s *Spec) { s.Extra = []Mount{{HostPath: "/x", Name: "a,b"}} }, "invalid extra mount name"},
		{"extra dup", func(s *Spec) {
			s.Extra = []Mount{{HostPath: "/x", Name: "a"}, {HostPath: "/y", Name: "a"}}
		}, "duplicate"},
		{"extra no host path", func(s *Spec) { s.Extra = []Mount{{Name: "a"}} }, "absolute host path"},
		{"extra relative", func(s *Spec) { s.Extra = []Mount{{HostPath: "x", Name: "a"}} }, "absolute host path"},
		{"command", func(s *Spec) { s.Command = []string{"/bin/sh", "-c", "exit 7"} }, ""},
		{"command nul", func(s *Spec) { s.Command = []string{"/bin/sh", "a\x00b"} }, "contains NUL"},
		{"command empty name", func(s *Spec) { s.Command = []string{""} }, "empty program name"},
		{"stdio without out", func(s *Spec) { s.Stdio = &Stdio{In: strings.NewReader("")} }, "stdio needs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mod(&s)
			err := s.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	set := Limits{Timeout: time.Second, OutputBytes: 1, MemoryBytes: 2, Pids: 3, CPUs: 0.5, TmpBytes: 4, ShmBytes: 5, DiskBytes: 6}
	tests := []struct {
		name string
		in   Limits
		want Limits
	}{
		{"zero", Limits{}, DefaultLimits},
		{"negative", Limits{Timeout: -1, OutputBytes: -1, MemoryBytes: -1, Pids: -1, CPUs: -1, TmpBytes: -1, ShmBytes: -1, DiskBytes: -1}, DefaultLimits},
		{"all set", set, set},
		{"some set", Limits{Pids: 7}, func() Limits { l := DefaultLimits; l.Pids = 7; return l }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.in.WithDefaults())
		})
	}
}

func TestTargetFor(t *testing.T) {
	tests := []struct {
		root, host, want string
	}{
		{"/p", "/p", "/workspace/extra/x"},
		{"/p", "/p/a", "/workspace/extra/x/a"},
		{"/p", "/p/a/b/.env", "/workspace/extra/x/a/b/.env"},
		{"/p/", "/p/a", "/workspace/extra/x/a"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, TargetFor("/workspace/extra/x", tc.root, tc.host), tc.host)
	}
}
