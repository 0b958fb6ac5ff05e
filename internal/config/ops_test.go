package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsAddrAndLogFormat(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Empty(t, c.MetricsAddr, "metrics are off by default")
	assert.Equal(t, "text", c.LogFormat)

	for _, tc := range []struct {
		name, addr, format string
		bad                string // the variable the error must name; "" = accepted
	}{
		{"loopback", "127.0.0.1:9464", "json", ""},
		{"every address", ":9464", "text", ""},
		{"ipv6 loopback", "[::1]:9464", "", ""},
		{"no port", "127.0.0.1", "", "CLAWPEN_METRICS_ADDR"},
		{"port out of range", "127.0.0.1:99999", "", "CLAWPEN_METRICS_ADDR"},
		{"unknown format", "", "logfmt", "CLAWPEN_LOG_FORMAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(env(map[string]string{"CLAWPEN_METRICS_ADDR": tc.addr, "CLAWPEN_LOG_FORMAT": tc.format}))
			if tc.bad != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.bad)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.addr, c.MetricsAddr)
		})
	}
}

func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "", want: 0},
		{in: "keep", want: 0},
		{in: "0", want: 0},
		{in: "90d", want: 90 * 24 * time.Hour},
		{in: "2160h", want: 2160 * time.Hour},
		{in: "1d", want: 24 * time.Hour},
		{in: "12h", bad: true},
		{in: "90 days", bad: true},
		{in: "-5d", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			c, err := FromEnv(env(map[string]string{"CLAWPEN_RETENTION": tc.in}))
			if tc.bad {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "CLAWPEN_RETENTION")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Retention)
		})
	}
}
