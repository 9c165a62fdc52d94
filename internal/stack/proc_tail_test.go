package stack

import (
	"strings"
	"testing"
	"time"
)

// A process that crashes like a Go program — the panic's message and the
// failing goroutine first, then a dump of every other goroutine — leaves
// the panic in Tail, not only the dump's last lines.
func TestTailKeepsACrashsHead(t *testing.T) {
	script := `echo '{"level":"info","msg":"serving"}' >&2
echo 'panic: runtime error: index out of range [3] with length 3' >&2
echo '' >&2
echo 'goroutine 7 [running]:' >&2
echo 'github.com/capgate/capgate/coordinator.(*Coordinator).crash(...)' >&2
i=0; while [ $i -lt 200 ]; do echo "goroutine $((i+100)) [select]: idle frame $i" >&2; i=$((i+1)); done
exit 2`
	p, err := StartProcess("crasher", "/bin/sh", []string{"-c", script}, CleanEnv(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(30 * time.Second); err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("exit: %v, want exit status 2", err)
	}
	tail := p.Tail()
	for _, want := range []string{"panic: runtime error: index out of range", "coordinator.(*Coordinator).crash", "idle frame 199"} {
		if !strings.Contains(tail, want) {
			t.Errorf("Tail lacks %q:\n%s", want, tail)
		}
	}
	if strings.Count(tail, "\n") > crashHeadLines+40+2 {
		t.Errorf("Tail of %d lines, want at most the crash's head and the last 40", strings.Count(tail, "\n"))
	}
}
