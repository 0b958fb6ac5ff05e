package domain

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCredentialExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "B_2": "beta", "BAD": "x\r\nInjected: 1", "TAB": "a\tb"}
	getenv := func(k string) string { return env[k] }
	c := Credential{Host: "127.0.0.2", Port: 8443, Header: "X", Value: "Bearer ${A}-${B_2}-${A}"}
	assert.Equal(t, "127.0.0.2:8443", c.Authority())
	assert.Equal(t, "[::1]:443", Credential{Host: "::1", Port: 443}.Authority())
	assert.Equal(t, []string{"A", "B_2"}, c.Vars())
	v, err := c.Expand(getenv)
	require.NoError(t, err)
	assert.Equal(t, "Bearer alpha-beta-alpha", v)

	_, err = Credential{Value: "${MISSING}"}.Expand(getenv)
	assert.EqualError(t, err, "MISSING is not set in the host's environment")
	_, err = Credential{Value: "${BAD}"}.Expand(getenv)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "Injected", "the error never carries the value")
	v, err = Credential{Value: "${TAB}"}.Expand(getenv)
	require.NoError(t, err)
	assert.Equal(t, "a\tb", v)
}

func TestParseTemplate(t *testing.T) {
	for _, ok := range []string{"${A}", "Bearer ${GITHUB_TOKEN}", "${a}:${b}", "token=${_X1}; x"} {
		assert.NoError(t, ParseTemplate(ok), ok)
	}
	for _, bad := range []string{"", "plain", "$A", "${}", "${1A}", "${A", "${A-B}", "x\ny${A}", "é${A}", "$${A}", "${A}$"} {
		assert.Error(t, ParseTemplate(bad), bad)
	}
}

// FuzzTemplate: a value ParseTemplate accepts expands to its literal text
// with each variable replaced, and names exactly the variables it holds.
func FuzzTemplate(f *testing.F) {
	f.Add("Bearer ${A}")
	f.Add("${A}${B}x${A}")
	f.Add("$}{${")
	f.Fuzz(func(t *testing.T, v string) {
		if ParseTemplate(v) != nil {
			return
		}
		c := Credential{Value: v}
		got, err := c.Expand(func(k string) string { return "<" + k + ">" })
		if err != nil {
			t.Fatal(err)
		}
		want := v
		for _, k := range c.Vars() {
			want = strings.ReplaceAll(want, "${"+k+"}", "<"+k+">")
		}
		if got != want || strings.Contains(got, "${") {
			t.Fatalf("%q expands to %q, want %q", v, got, want)
		}
	})
}
