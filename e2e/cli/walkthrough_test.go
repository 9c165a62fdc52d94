package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// shellBlocks returns the ```sh blocks of a markdown file, in order.
func shellBlocks(t *testing.T, path string) []string { return taggedBlocks(t, path, "sh") }

// walkthroughChecks is what each ```sh block of README.md must print,
// in order (stdout and stderr together).
var walkthroughChecks = []step{
	{"load credentials", nil},
	{"produce", []string{`produced 2 records to demo/0 \(offsets 0\.\.1\)`}},
	{"join", nil},
	{"fetch", []string{`"records":\[\{"offset":0,`, `"value":"aGVsbG8="`, `"value":"d29ybGQ="`, `HTTP 200`}},
	{"revoke", []string{`"partition":0,"epoch":\d+`, `HTTP 200`}},
	{"fetch again", []string{`"code":"capability_revoked"`, `HTTP 409`}},
	{"leave", []string{`HTTP 200`}},
	{"consume", []string{`demo/0\t0\t\thello`, `demo/0\t1\t\tworld`}},
	{"prefix credential", []string{`demo/0\t0\t\thello`, `demo/0\t1\t\tworld`, `forbidden`, `does not allow group billing: it allows groups orders-\*`, `billing: refused`}},
	{"describe", []string{`(?m)^GROUP\s+orders-eu$`, `(?m)^TOTAL-LAG\s+0$`,
		`TOPIC\s+PARTITION\s+STATE\s+EPOCH\s+CURRENT-OFFSET\s+LOG-END-OFFSET\s+LAG\s+OWNER`, `demo\s+0\s+\w+\s+\d+\s+2\s+2\s+0\s`}},
	{"describe a topic", []string{`(?m)^TOPIC\s+demo$`, `(?m)^PARTITIONS\s+12$`, `PARTITION\s+EARLIEST\s+LATEST\s+RECORDS`, `(?m)^0\s+0\s+2\s+2\s*$`}},
	{"reset and delete", []string{`orders-eu\s+demo\s+0\s+0\s*\n`, `(?m)^OFFSETS-DELETED\s+\d+$`, `404 not_found`, `orders-eu: gone`}},
	{"outside lease commits", []string{`"committed":\[\{"topic":"demo","partition":5,"offset":0`, `HTTP 200`}},
	{"qos merges", []string{`ID\s+SELECTOR\s+LOG-LEVEL\s+MONITOR\s+MAX-BYTES/S\s+UNTIL`, `group=readme\s+debug\s+-\s+4000\s`}},
	{"audit and version", []string{`partition_revoke\s+readme/demo/5\s+-\s+backfill done\s+ok`, `partition_lease\s+readme/demo/5\s+-\s+-\s+ok`,
		`group_delete\s+orders-eu\s+-\s+-\s+ok`, `qos\s+qos:[0-9a-f]+\s+group=readme: ended\s+-\s+ok`,
		`qos\s+qos:[0-9a-f]+\s+group=readme: max_bytes_per_sec=4000 for 1h0m0s\s+-\s+ok`, `"go_version": "go1\.`}},
	{"produce with a credential", []string{`produced 2 records to demo/7 \(offsets 0\.\.1\)`, `forbidden \(403\)`, `does not allow produce`, `orders.json: refused`}},
	{"oauth client", []string{`"access_token":"eyJ`, `"token_type":"Bearer"`, `HTTP 200`}},
	{"kek", []string{`wrote kek.key: KEK id [0-9a-f]{16}`, `(?m)^-rw------- .* kek\.key$`}},
}

// TestWalkthrough runs README.md's walk-through commands, as a user would paste
// them, against a running capgate dev, and checks what each prints: the
// client credential joins, the capability fetches (200 with the records),
// the admin revoke answers, and the same capability then gets 409
// capability_revoked.
func TestWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (apt-get install curl; .ci/run does)")
	}
	blocks := shellBlocks(t, "../../README.md")
	if len(blocks) != len(walkthroughChecks) {
		t.Fatalf("README.md has %d sh blocks, the test checks %d: update walkthroughChecks", len(blocks), len(walkthroughChecks))
	}
	work := t.TempDir()
	startDev(t, filepath.Join(work, "capgate-data"))

	steps := runBlocks(t, work, "walk-through", blocks)
	checkSteps(t, steps, walkthroughChecks)
}

// step is what one shell block must print (regular expressions).
type step = struct {
	step string
	want []string
}

// runBlocks runs blocks in order as one sh script in work, with the
// built capgate first on PATH, and returns what each printed (stdout and
// stderr together); a failing script or a missing step fails t.
func runBlocks(t *testing.T, work, what string, blocks []string) []string {
	t.Helper()
	var script strings.Builder
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '@@step %d'\n%s\n", i, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "exec 2>&1\n"+script.String())
	cmd.Dir = work
	cmd.Env = append(stack.CleanEnv(), "PATH="+filepath.Dir(capgate)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s script: %v\n%s", what, err, out)
	}
	steps := regexp.MustCompile(`(?m)^@@step \d+\n`).Split(string(out), -1)[1:]
	if len(steps) != len(blocks) {
		t.Fatalf("%s printed %d steps, want %d:\n%s", what, len(steps), len(blocks), out)
	}
	return steps
}

// checkSteps fails t for every step whose output misses a pattern.
func checkSteps(t *testing.T, steps []string, checks []step) {
	t.Helper()
	for i, check := range checks {
		for _, want := range check.want {
			if !regexp.MustCompile(want).MatchString(steps[i]) {
				t.Errorf("step %d (%s): output does not match %q:\n%s", i, check.step, want, steps[i])
			}
		}
	}
}
