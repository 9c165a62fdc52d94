package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/coordinator"
)

// `admin group G` prints who created the group (the tenant its
// groups_per_credential place is counted for), and "-" for a group an
// admin made; with the name the group keeps (creator_name) beside the
// id also when no member is live (newuser3 #11: the name came only from
// a live member of that credential).
func TestGroupDescribePrintsTheCreator(t *testing.T) {
	for creator, want := range map[[2]string]string{{"oauth:billing", ""}: "oauth:billing", {"", ""}: "-",
		{"cNda7QZl-v1-hdL8xhKsSA", "ing"}: "ing (cNda7QZl-v1-hdL8xhKsSA)"} {
		raw, _ := json.Marshal(coordinator.GroupDescription{Group: "g", Creator: creator[0], CreatorName: creator[1]})
		var out bytes.Buffer
		if err := printGroupDescription(&out, raw); err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "CREATOR") {
				line = l
			}
		}
		if f := strings.Fields(line); len(f) < 2 || strings.Join(f[1:], " ") != want {
			t.Fatalf("creator %q printed %q, want CREATOR %s in\n%s", creator, line, want, out.String())
		}
	}
}

// newuser3 #11: README says a member's credential id — what
// revoke-capability denies to stop it (revoke-member only removes it:
// it joins again) — is shown in the group's members, but the table had
// no credential column (only -o json had it). It shows the id and, when
// it differs, the credential's name.
func TestGroupDescribeShowsMembersCredentials(t *testing.T) {
	raw, _ := json.Marshal(coordinator.GroupDescription{Group: "g", Members: []coordinator.MemberView{
		{ID: "svc-1", ClientID: "svc", Credential: &coordinator.CredentialView{ID: "FWteVjuQhBg474oDG3V7UA", Subject: "orders-svc"}, Partitions: 2},
		{ID: "svc-2", Credential: &coordinator.CredentialView{ID: "oauth-tok", Subject: "oauth-tok"}},
		{ID: "old-3"},
	}})
	var out bytes.Buffer
	if err := printGroupDescription(&out, raw); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	var header []string
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "MEMBER-ID":
			header = f
		case header != nil && len(f) == len(header):
			rows[f[0]] = f
		}
	}
	want := map[string][2]string{"svc-1": {"FWteVjuQhBg474oDG3V7UA", "orders-svc"}, "svc-2": {"oauth-tok", "-"}, "old-3": {"-", "-"}}
	if len(header) < 5 || header[3] != "CREDENTIAL" || header[4] != "CREDENTIAL-NAME" {
		t.Fatalf("members header %q\n%s", header, out.String())
	}
	for id, w := range want {
		if r := rows[id]; len(r) < 5 || r[3] != w[0] || r[4] != w[1] {
			t.Fatalf("member %s: row %q, want credential %q name %q\n%s", id, r, w[0], w[1], out.String())
		}
	}
}
