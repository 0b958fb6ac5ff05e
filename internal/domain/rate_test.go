package domain

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSenderRate(t *testing.T) {
	for in, want := range map[string]int{"20/h": 20, "0": 0, " 5/h ": 5, "0/h": 0, "10000/h": 10000} {
		n, err := ParseSenderRate(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"", "20", "20/d", "-1/h", "x/h", "10001/h", "5 /h"} {
		_, err := ParseSenderRate(in)
		assert.Error(t, err, in)
	}

	p, err := ParseSenderPolicy([]byte(`{"rate":"5/h"}`), DefaultSenderPolicy)
	require.NoError(t, err)
	assert.Equal(t, SenderPolicy{All: true, Mode: SenderModeTrigger, Rate: 5, RateSet: true}, p, "a rate alone lets every member call")
	p, err = ParseSenderPolicy([]byte(`{"allow":[7],"rate":"0"}`), DefaultSenderPolicy)
	require.NoError(t, err)
	assert.True(t, p.RateSet)
	assert.Equal(t, 0, p.Rate)
	p, err = ParseSenderPolicy([]byte(`{"allow":"*"}`), DefaultSenderPolicy)
	require.NoError(t, err)
	assert.False(t, p.RateSet, "no rate: the host's applies")
	p, err = ParseSenderPolicy([]byte(`{"allow":"*","rate":"lots"}`), DefaultSenderPolicy)
	require.Error(t, err)
	assert.False(t, p.Decide(5, 1).MayTrigger, "a bad rate fails closed")
}
