package bwrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

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
