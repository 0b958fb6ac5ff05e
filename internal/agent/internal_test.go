package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStripInternal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hello", "hello"},
		{"  hello \n", "hello"},
		{"<internal>thinking</internal>Hello", "Hello"},
		{"Hi <internal>a</internal>there<internal>b</internal>!", "Hi there!"},
		{"Answer.\n<internal>multi\nline</internal>", "Answer."},
		{"<INTERNAL>x</Internal>shout", "shout"},
		{"visible <internal>never closed", "visible"},
		{"<internal>only</internal>", ""},
		{"stray </internal> tag", "stray  tag"},
		{"<internal>a <internal>b</internal> c</internal>d", "cd"},
		{"<internal", "<internal"},
		{"İstanbul <internal>x</internal>ok", "İstanbul ok"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, StripInternal(tt.in))
		})
	}
}
