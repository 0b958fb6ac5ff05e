package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAndDecide(t *testing.T) {
	const owner = 1
	cases := []struct {
		name    string
		raw     string
		sender  int64
		want    Verdict
		wantErr bool
	}{
		{"empty is default", "", 5, Verdict{true, true}, false},
		{"everyone", `{"allow":"*"}`, 5, Verdict{true, true}, false},
		{"listed user", `{"allow":[5,6],"mode":"trigger"}`, 5, Verdict{true, true}, false},
		{"unlisted user, trigger mode: context only", `{"allow":[6],"mode":"trigger"}`, 5, Verdict{true, false}, false},
		{"unlisted user, drop mode: not stored", `{"allow":[6],"mode":"drop"}`, 5, Verdict{false, false}, false},
		{"owner always allowed", `{"allow":[],"mode":"drop"}`, owner, Verdict{true, true}, false},
		{"malformed JSON fails closed", `{"allow":`, 5, Verdict{true, false}, true},
		{"unknown field fails closed", `{"allow":"*","admins":[5]}`, 5, Verdict{true, false}, true},
		{"bad star fails closed", `{"allow":"everyone"}`, 5, Verdict{true, false}, true},
		{"bad mode fails closed", `{"allow":"*","mode":"open"}`, 5, Verdict{true, false}, true},
		{"negative id fails closed", `{"allow":[-5]}`, 5, Verdict{true, false}, true},
		{"missing allow fails closed", `{"mode":"trigger"}`, 5, Verdict{true, false}, true},
		{"wrong type fails closed", `{"allow":5}`, 5, Verdict{true, false}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.raw), Default)
			if c.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.want, p.Decide(c.sender, owner))
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"allow":"*"}`)
	f.Add(`{"allow":[1,2],"mode":"drop"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := Parse([]byte(raw), Default)
		if err != nil {
			// Fail closed: a stranger never triggers under a broken policy.
			assert.False(t, p.Decide(99, 1).MayTrigger)
		}
	})
}
