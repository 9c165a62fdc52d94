package harness_test

import (
	"bytes"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/e2e/harness"
)

// traceFields are the fields a gateway writes on a fetch trace line
// (gateway/call.go finish).
func traceFields(started time.Time) []zap.Field {
	return []zap.Field{
		zap.Int64("offset", 7), zap.Int64("next_offset", 9),
		zap.String("jti", "j1"), zap.String("holder", "m1"), zap.String("group", "g"), zap.String("topic", "orders"),
		zap.Int32("partition", 3), zap.Uint64("epoch", 4), zap.String("outcome", "ok"), zap.Int("records", 2),
		zap.Int("bytes", 100), zap.Time("started", started), zap.Duration("elapsed", 1500*time.Microsecond),
	}
}

func checkTraced(t *testing.T, f harness.Fetch, started time.Time) {
	t.Helper()
	want := harness.PartitionKey{Group: "g", Topic: "orders", Partition: 3}
	if f.Gateway != "gw1" || f.Key != want || f.Holder != "m1" || f.Epoch != 4 || !f.OK() || f.Records != 2 || f.Offset != 7 || f.Next != 9 {
		t.Errorf("parsed %+v", f)
	}
	// Within 50 µs: the production encoder writes float seconds (~0.24 µs
	// apart at today's epoch), and each FromWall reads the wall-to-monotonic
	// offset afresh, to within half of two clock reads — under the race
	// detector that was 1.5 µs once (CI). A misparsed field is off by far
	// more (units, zone, the wrong field).
	if d := f.Start.Sub(harness.FromWall(started)); d < -50*time.Microsecond || d > 50*time.Microsecond {
		t.Errorf("start off by %v", d)
	}
	if d := f.End.Sub(f.Start); d < 1499*time.Microsecond || d > 1501*time.Microsecond {
		t.Errorf("elapsed %v, want 1.5ms", d)
	}
}

// A gateway process logs with zap's production JSON encoder (times and
// durations as float seconds); ParseTraceLine reads those lines.
func TestParseTraceLineOfProductionJSON(t *testing.T) {
	var buf bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.DebugLevel)
	started := time.Now()
	zap.New(core).Named("trace").Debug("fetch_json", traceFields(started)...)
	zap.New(core).Named("http").Info("fetch_json", traceFields(started)...) // not a trace line
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	f, ok := harness.ParseTraceLine("gw1", lines[0])
	if !ok {
		t.Fatalf("not parsed: %s", lines[0])
	}
	checkTraced(t, f, started)
	if _, ok := harness.ParseTraceLine("gw1", lines[1]); ok {
		t.Errorf("a line of another logger parsed as a trace: %s", lines[1])
	}
}

// An in-process gateway's logger tees into TraceCore, which turns its
// trace lines into Fetch events and ignores everything else.
func TestTraceCoreRecordsFetches(t *testing.T) {
	log := harness.NewLog()
	logger := zap.New(harness.TraceCore("gw1", log)).Named("gateway-1")
	started := time.Now()
	logger.Named("trace").Debug("fetch_json", traceFields(started)...)
	logger.Named("trace").Debug("produce", traceFields(started)...)
	logger.Info("gateway started")
	s := log.Snapshot()
	if len(s.Fetches) != 1 {
		t.Fatalf("%d fetches recorded, want 1: %+v", len(s.Fetches), s.Fetches)
	}
	checkTraced(t, s.Fetches[0], started)
}

func TestTimelineConversions(t *testing.T) {
	now := time.Now()
	// Each conversion reads the wall-to-monotonic offset afresh (the
	// midpoint of two monotonic reads around a wall read: off by half
	// their gap, tens of ns, more when the reader is preempted between
	// them under -race: CI once saw +45ns), so the round trip and the
	// comparison with Now allow a millisecond.
	if d := harness.FromWall(now).Wall().Sub(now); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("wall → timeline → wall off by %v", d)
	}
	if d := harness.FromWall(now).Sub(harness.Now()); d > time.Millisecond || d < -time.Second {
		t.Errorf("a wall time just read converts %v from Now", d)
	}
}
