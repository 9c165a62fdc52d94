package cli_test

import (
	"path/filepath"
	"testing"
)

// TestWalkthroughWithReplicas runs README.md's first walk-through steps —
// load credentials.env, produce, and the SDK's consume — against
// `capgate dev --replicas 3`, whose credentials.env names the three
// replicas comma-separated: produce took the list for one URL ("invalid
// port") and failed, so the walk-through's first command did.
func TestWalkthroughWithReplicas(t *testing.T) {
	blocks := shellBlocks(t, "../../README.md")
	if len(blocks) != len(walkthroughChecks) {
		t.Fatalf("README.md has %d sh blocks, the test checks %d: update walkthroughChecks", len(blocks), len(walkthroughChecks))
	}
	var picked []string
	var checks []step
	for i, check := range walkthroughChecks {
		switch check.step {
		case "load credentials", "produce", "consume":
			picked, checks = append(picked, blocks[i]), append(checks, check)
		}
	}
	if len(picked) != 3 {
		t.Fatalf("found %d of the 3 steps in walkthroughChecks", len(picked))
	}
	work := t.TempDir()
	startDev(t, filepath.Join(work, "capgate-data"), "--replicas", "3")
	// A failing step ends the script (else consume waits for records
	// that were never produced).
	picked[0] = "set -e\n" + picked[0]
	picked = append(picked, "capgate admin groups -o table")
	checks = append(checks, step{"admin", []string{`(?m)^GROUP\s`, `(?m)^readme\s`}})
	steps := runBlocks(t, work, "walk-through with replicas", picked)
	checkSteps(t, steps, checks)
}
