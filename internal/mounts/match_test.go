package mounts

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatchBlocked(t *testing.T) {
	al := Allowlist{Blocked: []string{"Password", "secret"}}
	tests := []struct {
		name    string
		pattern string // "" = no match
	}{
		{".ssh", ".ssh"},
		{".SSH", ".ssh"},
		{"My.Ssh", ".ssh"},
		{".ssh_old", ".ssh"},
		{".env", ".env"},
		{".env.local", ".env"},
		{"prod.env", ".env"},
		{"credentials.json", "credentials"},
		{"CREDENTIALS", "credentials"},
		{"id_rsa.pub", "id_rsa"},
		{"my-passwords.txt", "password"},
		{"top-SECRET", "secret"},
		{".secrets", ".secret"},
		{"．ｓｓｈ", ".ssh"},               // fullwidth
		{"\u2024ssh", ".ssh"},          // one dot leader
		{".ѕѕһ", ".ssh"},               // Cyrillic dze, shha
		{"сredentials", "credentials"}, // Cyrillic es
		{".еnv", ".env"},               // Cyrillic ie
		{".ΕNV", ".env"},               // Greek capital epsilon
		{".s\u200bsh", ".ssh"},         // zero-width space
		{".s\u00adsh", ".ssh"},         // soft hyphen
		{".ss\u0301h", ".ssh"},         // combining mark
		{"ıd_rsa", "id_rsa"},           // dotless i
		{"\u212Aube", ""},              // Kelvin sign folds to k, but "kube" needs the dot
		{".\u212Aube", ".kube"},        // Kelvin sign
		{"src", ""},
		{"ssh", ""},
		{"env", ""},
		{"environment", ""},
		{"main.go", ""},
		{"kube", ""},
		{"id-rsa", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := al.MatchBlocked(tt.name)
			if tt.pattern == "" {
				assert.False(t, ok, "matched %q", p)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.pattern, p)
		})
	}
}

func TestFoldIsASCIIForLookalikes(t *testing.T) {
	for r, a := range lookalike {
		assert.Less(t, a, rune(0x80), "lookalike %U maps to non-ASCII", r)
		assert.Equal(t, string(fold(string(a))), fold(string(r)), "%U", r)
	}
}
