package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordingLogger is a kgo logger that keeps what reaches it.
type recordingLogger struct {
	level kgo.LogLevel
	got   []string
}

func (r *recordingLogger) Level() kgo.LogLevel { return r.level }
func (r *recordingLogger) Log(_ kgo.LogLevel, msg string, _ ...any) {
	r.got = append(r.got, msg)
}

// The writer's logger counts kgo's silent abort (and nothing else) and
// passes on exactly what the configured logger asked for.
func TestAbortWatchCountsTheSilentAbort(t *testing.T) {
	const abortMsg = "no produce succeeded in this transaction but produces were attempted; issuing an abort to clear any server-side partition registrations"
	inner := &recordingLogger{level: kgo.LogLevelWarn}
	w := &abortWatch{inner: inner}
	if w.Level() != kgo.LogLevelInfo {
		t.Fatalf("level %v below Info: the message would never be logged", w.Level())
	}
	w.Log(kgo.LogLevelInfo, "beginning transaction")
	w.Log(kgo.LogLevelDebug, abortMsg) // not kgo's level for it
	if n := w.aborts.Load(); n != 0 {
		t.Fatalf("counted %d aborts before any", n)
	}
	w.Log(kgo.LogLevelInfo, abortMsg, "transactional_id", "x")
	w.Log(kgo.LogLevelWarn, "a warning")
	if n := w.aborts.Load(); n != 1 {
		t.Fatalf("counted %d aborts, want 1", n)
	}
	if len(inner.got) != 1 || inner.got[0] != "a warning" {
		t.Fatalf("configured Warn logger got %q, want only the warning", inner.got)
	}

	debug := &recordingLogger{level: kgo.LogLevelDebug}
	w = &abortWatch{inner: debug}
	w.Log(kgo.LogLevelDebug, "wrote Fetch")
	if w.Level() != kgo.LogLevelDebug || len(debug.got) != 1 {
		t.Fatalf("a Debug logger is not passed Debug lines: level %v, got %q", w.Level(), debug.got)
	}
	w = &abortWatch{}
	w.Log(kgo.LogLevelInfo, abortMsg) // no configured logger: no panic, still counted
	if w.aborts.Load() != 1 {
		t.Fatal("not counted without a configured logger")
	}
}

// The text the writer watches for is the text the kgo in go.mod logs: a
// kgo upgrade that rewords it fails here, not in a takeover that hangs.
func TestKgoStillLogsTheSilentAbort(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	src, err := os.ReadFile(filepath.Join(dir, "pkg", "kgo", "txn.go"))
	if err != nil {
		t.Fatalf("kgo source: %v", err)
	}
	if !strings.Contains(string(src), `LogLevelInfo, "`+kgoSilentAbort) {
		t.Fatalf("kgo at %s no longer logs %q at Info: abortWatch cannot see a silent abort", dir, kgoSilentAbort)
	}
}
