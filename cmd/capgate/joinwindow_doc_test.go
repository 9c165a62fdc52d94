package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/capgate/capgate/coordinator"
)

// TestJoinWindowIsDocumentedWhereAJoinIsTimed: a user who times the
// walk-through's curl join, or reads the join operation of
// api/openapi.yaml, met "Answers at once (no join barrier)" — while the
// first join into an empty group waits groups.initial_assign_delay
// (newuser10). Both name the wait, with the default the coordinator has.
func TestJoinWindowIsDocumentedWhereAJoinIsTimed(t *testing.T) {
	groups := coordinator.DefaultConfig().Groups
	delay := fmt.Sprintf("%d ms", groups.InitialAssignDelay.Milliseconds())
	openapi, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	join := string(openapi)
	join = join[strings.Index(join, "operationId: join\n"):]
	join = join[:strings.Index(join, "x-capgate-servers")]
	for _, want := range []string{"groups.initial_assign_delay (" + delay + ")", fmt.Sprintf("groups.initial_assign_delay_max (%d s)", int(groups.InitialAssignDelayMax.Seconds()))} {
		if !strings.Contains(join, want) {
			t.Errorf("the join operation's description lacks %q:\n%s", want, join)
		}
	}
	if strings.Contains(join, "Answers at once") {
		t.Errorf("the join operation says it answers at once:\n%s", join)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	walk := string(readme)
	walk = walk[strings.Index(walk, "Join group `g` with the client credential."):]
	walk = walk[:strings.Index(walk, "```")]
	if !strings.Contains(walk, "~"+delay+" later") || !strings.Contains(walk, "(#a-service-starting-at-once-the-join-window)") {
		t.Errorf("the walk-through's join does not say its first answer waits %s:\n%s", delay, walk)
	}
}
