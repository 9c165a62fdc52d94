package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
)

// lockedBuffer is a bytes.Buffer safe for the consumer's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the JSON lines written so far, decoded.
func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestWithSlogLogsThroughTheHandler: a consumer given WithSlog logs its
// lines through the slog handler — message, level, fields as attributes,
// the SDK's source position — and the handler's level holds lines back.
func TestWithSlogLogsThroughTheHandler(t *testing.T) {
	var out lockedBuffer
	h := slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo, AddSource: true})
	e := newEnv(t, func(int) []api.Grant { return nil })
	c := e.start(e.config(), WithSlog(slog.New(h)))
	var joined map[string]any
	waitFor(t, "the join logged", func() bool {
		for _, l := range out.lines(t) {
			if l["msg"] == "joined" {
				joined = l
				return true
			}
		}
		return false
	})
	source, _ := joined["source"].(map[string]any)
	file, _ := source["file"].(string)
	if joined["level"] != "INFO" || joined["member"] != c.MemberID() || joined["member"] == "" ||
		joined["grants"] == nil || !strings.HasSuffix(file, "client/consumer.go") {
		t.Fatalf("the join's line: %v, want INFO with member %q, grants and the SDK's source", joined, c.MemberID())
	}
	for _, l := range out.lines(t) {
		if l["level"] == "DEBUG" {
			t.Fatalf("a debug line through an Info handler: %v", l)
		}
	}
}

// TestSlogCoreFields: zap's fields come out as slog attributes, in their
// order, With's fields on every line, levels mapped.
func TestSlogCoreFields(t *testing.T) {
	var out lockedBuffer
	log := zap.New(slogCore{h: slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})}).With(zap.String("group", "billing"))
	log.Debug("d")
	log.Warn("fetch failed", zap.Duration("wait", 1500*time.Millisecond), zap.Error(errors.New("connection refused")),
		zap.Stringers("partitions", []Partition{{Topic: "orders", Partition: 3}}), zap.Int("n", 7))
	log.Error("e")
	lines := out.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %v", len(lines), lines)
	}
	for i, level := range []string{"DEBUG", "WARN", "ERROR"} {
		if lines[i]["level"] != level || lines[i]["group"] != "billing" {
			t.Fatalf("line %d: %v, want %s with group billing", i, lines[i], level)
		}
	}
	w := lines[1]
	parts, _ := w["partitions"].([]any)
	if w["msg"] != "fetch failed" || w["wait"] != float64(1500*time.Millisecond) || w["error"] != "connection refused" ||
		len(parts) != 1 || parts[0] != "orders/3" || w["n"] != float64(7) {
		t.Fatalf("warning: %v", w)
	}
	var o options
	if WithSlog(nil)(&o); o.log == nil {
		t.Fatal("WithSlog(nil) left no logger: want no logging, not a nil one")
	}
}

// TestSlogCoreAnyValues: a zap.Any value of no zap type comes out as a
// user reads it — a struct slice as JSON (inline through a JSON handler,
// not Go's {Topic:orders Partition:3} through a text handler), a Stringer
// as its text — and a duration as a slog Duration (the text handler's
// 1.5s).
func TestSlogCoreAnyValues(t *testing.T) {
	refs := []api.PartitionRef{{Topic: "orders", Partition: 3, Epoch: 2}}
	var js lockedBuffer
	zap.New(slogCore{h: slog.NewJSONHandler(&js, nil)}).Info("news", zap.Any("revoke", refs), zap.Any("p", Partition{Topic: "orders", Partition: 1}))
	line := js.lines(t)[0]
	revoke, _ := line["revoke"].([]any)
	var first map[string]any
	if len(revoke) == 1 {
		first, _ = revoke[0].(map[string]any)
	}
	if first["topic"] != "orders" || first["partition"] != float64(3) || line["p"] != "orders/1" {
		t.Errorf("JSON handler: %v, want revoke as [{topic: orders, partition: 3, …}] and p orders/1", line)
	}
	var text lockedBuffer
	zap.New(slogCore{h: slog.NewTextHandler(&text, nil)}).Info("news", zap.Any("revoke", refs), zap.Duration("wait", 1500*time.Millisecond))
	got := text.buf.String()
	if strings.Contains(got, "Topic:") || !strings.Contains(got, `"topic\":\"orders\"`) || !strings.Contains(got, "wait=1.5s") {
		t.Errorf("text handler: %s, want revoke as JSON and wait=1.5s", got)
	}
}
