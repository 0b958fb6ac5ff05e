package tools

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"testing"
)

var (
	integerForm = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
	decimalForm = regexp.MustCompile(`^(0|-?[1-9][0-9]*|-?(0|[1-9][0-9]*)\.[0-9]*[1-9])$`)
)

// FuzzPrepare: whatever arguments an agent sends, a call that is accepted
// has one argv element per command element; a string is passed as it is;
// an integer as an integer and any number in one decimal form, of the
// value the agent sent; and the same values always have the same digest.
func FuzzPrepare(f *testing.F) {
	tl, err := Parse("/tools/f.md", def(`name: f
description: x
command: ["/bin/echo", "s={s}", "{i}", "{n}", "{b}", "{s}{i}"]
input_schema:
  type: object
  properties:
    s: {type: string}
    i: {type: integer, default: 3}
    n: {type: number}
    b: {type: boolean, default: false}
    o: {type: object}
  required: [s, n]`))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"s":"x","n":1}`, `{"s":"{i}","i":100e-1,"n":-0.0}`, `{"s":"","n":2.50E-1,"b":true}`,
		`{"s":"a","n":1e400}`, `{"s":"a","n":9223372036854775809,"i":-0}`, `{"s":"a","n":1e-7,"o":{"k":[1e2,{"z":-0}]}}`,
		`{"s":"\u0000","n":0.000}`, `{"s":1,"n":1}`, `[]`, `{"s":"a","n":1e99999999999}`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		c, err := tl.Prepare(args)
		if err != nil {
			return
		}
		if len(c.Argv) != 6 {
			t.Fatalf("argv %q for a command of 6 elements", c.Argv)
		}
		var in struct {
			S string
			I *json.Number
			N json.Number
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("accepted %q, which encoding/json reads as: %v", args, err)
		}
		if c.Argv[1] != "s="+in.S {
			t.Fatalf("string %q passed as %q", in.S, c.Argv[1])
		}
		if !integerForm.MatchString(c.Argv[2]) || !decimalForm.MatchString(c.Argv[3]) {
			t.Fatalf("numbers passed as %q and %q", c.Argv[2], c.Argv[3])
		}
		if in.I != nil {
			sameValue(t, string(*in.I), c.Argv[2])
		}
		sameValue(t, string(in.N), c.Argv[3])
		again, err := tl.Prepare(args)
		if err != nil || again.Digest != c.Digest {
			t.Fatalf("the same arguments again: %v, digest %s then %s", err, c.Digest, again.Digest)
		}
	})
}

// sameValue fails unless the JSON number sent and the text passed are one
// value.
func sameValue(t *testing.T, sent, passed string) {
	t.Helper()
	a, okA := new(big.Rat).SetString(sent)
	b, okB := new(big.Rat).SetString(passed)
	if !okA || !okB || a.Cmp(b) != 0 {
		t.Fatalf("number %s passed as %s", sent, passed)
	}
}
