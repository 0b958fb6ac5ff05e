package bwrap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCapWriter(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		writes    []string
		want      string
		truncated bool
	}{
		{"under", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly", 6, []string{"abc", "def"}, "abcdef", false},
		{"over in one write", 4, []string{"abcdef"}, "abcd", true},
		{"over across writes", 4, []string{"abc", "def", "ghi"}, "abcd", true},
		{"zero", 0, []string{"a"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			calls := 0
			w := &capWriter{w: &out, limit: tc.limit, onLimit: func() { calls++ }}
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				assert.NoError(t, err)
				assert.Equal(t, len(s), n, "the pipe must keep draining")
			}
			assert.Equal(t, tc.want, out.String())
			assert.Equal(t, tc.truncated, w.truncated())
			if tc.truncated {
				assert.Equal(t, 1, calls)
			} else {
				assert.Equal(t, 0, calls)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"short", 8, []string{"ab", "cd"}, "abcd"},
		{"rolls", 4, []string{"abc", "def"}, "cdef"},
		{"one big write", 3, []string{"abcdefg"}, "efg"},
		{"exact", 3, []string{"abc"}, "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := &tailBuffer{max: tc.max}
			for _, s := range tc.writes {
				_, _ = tb.Write([]byte(s))
			}
			assert.Equal(t, tc.want, tb.String())
		})
	}
}

func TestBwrapFailure(t *testing.T) {
	tests := []struct {
		stderr string
		want   string
		ok     bool
	}{
		{"bwrap: Can't find source path /proc/self/fd/8: Permission denied\n", "Can't find source path /proc/self/fd/8: Permission denied", true},
		{"agent: bwrap: not at line start\n", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := bwrapFailure(tc.stderr)
		assert.Equal(t, tc.ok, ok, tc.stderr)
		assert.Equal(t, tc.want, got)
	}
}
