package domain

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSenderPolicyParseAndDecide(t *testing.T) {
	const owner = 1
	cases := []struct {
		name    string
		raw     string
		sender  int64
		want    SenderVerdict
		wantErr bool
	}{
		{"empty is default", "", 5, SenderVerdict{true, true}, false},
		{"everyone", `{"allow":"*"}`, 5, SenderVerdict{true, true}, false},
		{"listed user", `{"allow":[5,6],"mode":"trigger"}`, 5, SenderVerdict{true, true}, false},
		{"unlisted user, trigger mode: context only", `{"allow":[6],"mode":"trigger"}`, 5, SenderVerdict{true, false}, false},
		{"unlisted user, drop mode: not stored", `{"allow":[6],"mode":"drop"}`, 5, SenderVerdict{false, false}, false},
		{"owner always allowed", `{"allow":[],"mode":"drop"}`, owner, SenderVerdict{true, true}, false},
		{"malformed JSON fails closedSenderPolicy", `{"allow":`, 5, SenderVerdict{true, false}, true},
		{"unknown field fails closedSenderPolicy", `{"allow":"*","admins":[5]}`, 5, SenderVerdict{true, false}, true},
		{"bad star fails closedSenderPolicy", `{"allow":"everyone"}`, 5, SenderVerdict{true, false}, true},
		{"bad mode fails closedSenderPolicy", `{"allow":"*","mode":"open"}`, 5, SenderVerdict{true, false}, true},
		{"negative id fails closedSenderPolicy", `{"allow":[-5]}`, 5, SenderVerdict{true, false}, true},
		{"missing allow fails closedSenderPolicy", `{"mode":"trigger"}`, 5, SenderVerdict{true, false}, true},
		{"wrong type fails closedSenderPolicy", `{"allow":5}`, 5, SenderVerdict{true, false}, true},
		{"name in another case fails closedSenderPolicy", `{"Allow":"*"}`, 5, SenderVerdict{true, false}, true},
		{"duplicate name fails closedSenderPolicy", `{"allow":[6],"allow":"*"}`, 5, SenderVerdict{true, false}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseSenderPolicy([]byte(c.raw), DefaultSenderPolicy)
			if c.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.want, p.Decide(c.sender, owner))
		})
	}
}

func FuzzParseSenderPolicy(f *testing.F) {
	f.Add(`{"allow":"*"}`)
	f.Add(`{"allow":[1,2],"mode":"drop"}`)
	f.Add(`{"rate":"5/h"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParseSenderPolicy([]byte(raw), DefaultSenderPolicy)
		if err != nil {
			// Fail closedSenderPolicy: a stranger never triggers under a broken policy.
			assert.False(t, p.Decide(99, 1).MayTrigger)
		}
	})
}
