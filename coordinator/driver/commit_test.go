package driver_test

import (
	"errors"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/ocap"
)

// tokens is a Verifier over fixed claims: token → claims; "denied:" and
// "expired" tokens as their names say.
type tokens map[string]*ocap.Claims

func (t tokens) Capability(token string) (*ocap.Claims, bool, error) {
	switch token {
	case "expired":
		return nil, false, ocap.ErrExpired
	case "denied":
		return t["good"], true, nil
	}
	c, ok := t[token]
	if !ok {
		return nil, false, errors.New("bad signature")
	}
	return c, false, nil
}

// TestCommitOffsets: the checks a commit's capabilities go through before
// the machine sees it, one case per refusal, and a release's exemption
// from the deny-list. The simulation runs this same function.
func TestCommitOffsets(t *testing.T) {
	p := int32(3)
	claims := func(edit func(*ocap.Claims)) *ocap.Claims {
		c := &ocap.Claims{Subject: "m1", Group: "g", Topic: "t", Partition: &p, Epoch: 4, Ops: driver.GrantOps}
		if edit != nil {
			edit(c)
		}
		return c
	}
	v := tokens{
		"good":       claims(nil),
		"other-grp":  claims(func(c *ocap.Claims) { c.Group = "h" }),
		"shared":     claims(func(c *ocap.Claims) { c.Epoch = 0 }),
		"other-sub":  claims(func(c *ocap.Claims) { c.Subject = "m2" }),
		"other-part": claims(func(c *ocap.Claims) { q := int32(4); c.Partition = &q }),
		"fetch-only": claims(func(c *ocap.Claims) { c.Ops = ocap.Ops(ocap.OpFetch) }),
		"range":      claims(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 10, To: 20} }),
	}
	cases := []struct {
		token   string
		offset  int64
		release bool
		want    api.Code // "" accepted
	}{
		{"good", 5, false, ""},
		{"good", -1, false, api.CodeBadRequest},
		{"good", -1, true, ""},
		{"", 5, false, api.CodeUnauthorized},
		{"forged", 5, false, api.CodeUnauthorized},
		{"expired", 5, false, api.CodeTokenExpired},
		{"denied", 5, false, api.CodeCapabilityRevoked},
		{"denied", 5, true, ""},
		{"other-grp", 5, false, api.CodeForbidden},
		{"shared", 5, false, api.CodeForbidden},
		{"other-sub", 5, false, api.CodeForbidden},
		{"other-part", 5, false, api.CodeForbidden},
		{"fetch-only", 5, false, api.CodeForbidden},
		{"range", 9, false, api.CodeForbidden},
		{"range", 10, false, ""},
		{"range", 20, false, ""}, // the range end: everything below it processed
		{"range", 21, false, api.CodeForbidden},
	}
	for _, c := range cases {
		offsets := []api.CommitOffset{{Topic: "t", Partition: 3, Offset: c.offset, Capability: c.token}}
		out, refusal := driver.CommitOffsets(v, "g", "m1", offsets, c.release)
		got := api.Code("")
		if refusal != nil {
			got = refusal.Code
		}
		if got != c.want {
			t.Errorf("token %q offset %d release %t: got %q (%v), want %q", c.token, c.offset, c.release, got, refusal, c.want)
			continue
		}
		if got == "" && (len(out) != 1 || out[0].Epoch != 4 || out[0].Offset != c.offset) {
			t.Errorf("token %q: machine offsets %+v, want epoch 4 offset %d", c.token, out, c.offset)
		}
	}
}
