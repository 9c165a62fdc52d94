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
// admin made.
func TestGroupDescribePrintsTheCreator(t *testing.T) {
	for creator, want := range map[string]string{"oauth:billing": "oauth:billing", "": "-"} {
		raw, _ := json.Marshal(coordinator.GroupDescription{Group: "g", Creator: creator})
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
		if f := strings.Fields(line); len(f) != 2 || f[1] != want {
			t.Fatalf("creator %q printed %q, want CREATOR %s in\n%s", creator, line, want, out.String())
		}
	}
}
