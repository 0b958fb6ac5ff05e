package sandbox

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		{"over then more", 5, []string{"abc", "defgh", "more"}, "abcde", true},
		{"zero", 0, []string{"a"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			var calls atomic.Int32
			called := make(chan struct{}, 8)
			w := &CapWriter{W: &out, Limit: tc.limit, OnLimit: func() { calls.Add(1); called <- struct{}{} }}
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				assert.NoError(t, err)
				assert.Equal(t, len(s), n, "the pipe must keep draining")
			}
			assert.Equal(t, tc.want, out.String())
			assert.Equal(t, tc.truncated, w.Truncated())
			if tc.truncated {
				<-called // OnLimit runs asynchronously
				_, _ = w.Write([]byte("again"))
				assert.Equal(t, tc.want, out.String())
				assert.Equal(t, int32(1), calls.Load())
			} else {
				// OnLimit is only ever started by a write past the limit.
				assert.Empty(t, called)
			}
		})
	}
}

// TestCapWriterCallbackOutsideLock: OnLimit may use the writer (or block on
// something that does) without deadlocking it.
func TestCapWriterCallbackOutsideLock(t *testing.T) {
	var out strings.Builder
	done := make(chan bool)
	var w *CapWriter
	w = &CapWriter{W: &out, Limit: 2, OnLimit: func() { done <- w.Truncated() }}
	_, _ = w.Write([]byte("abc"))
	assert.True(t, <-done)
}

func TestCapWriterNilAndFailingWriter(t *testing.T) {
	w := &CapWriter{Limit: 1}
	n, err := w.Write([]byte("ab"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.True(t, w.Truncated(), "nil W discards, nil OnLimit is skipped")

	writes := 0
	f := &CapWriter{W: writerFunc(func(p []byte) (int, error) { writes++; return 0, errors.New("broken") }), Limit: 100}
	for range 3 {
		n, err := f.Write([]byte("x"))
		require.NoError(t, err, "a failing W must not stop the stream draining")
		assert.Equal(t, 1, n)
	}
	assert.Equal(t, 1, writes, "W is not written again after it failed")
	assert.False(t, f.Truncated())
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"short", 8, []string{"ab", "cd"}, "abcd"},
		{"rolls", 4, []string{"abc", "def"}, "cdef"},
		{"rolls across writes", 4, []string{"ab", "cde", "123456"}, "3456"},
		{"one big write", 3, []string{"abcdefg"}, "efg"},
		{"exact", 3, []string{"abc"}, "abc"},
		{"zero", 0, []string{"abc"}, ""},
		{"negative", -1, []string{"abc", "d"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := &Tail{Max: tc.max}
			for _, s := range tc.writes {
				n, err := tb.Write([]byte(s))
				require.NoError(t, err)
				assert.Equal(t, len(s), n)
			}
			assert.Equal(t, tc.want, tb.String())
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
