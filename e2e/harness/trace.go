package harness

import (
	"encoding/json"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// A gateway writes one debug line per request, on its logger named
// "trace", for capabilities whose QoS log level is debug (Cluster.Trace
// turns it on for a whole group). The message is the op (fetch_json,
// fetch_raw, produce); the fields name jti, holder, group, topic,
// partition, epoch, outcome ("ok" or an api code), records, bytes,
// started (time) and elapsed (duration), and for fetches offset and
// next_offset.

// TraceCore returns a zapcore.Core that turns an in-process gateway's
// fetch trace lines into Fetch events in log; tee it into the logger given
// to gateway.New. It ignores every other entry.
func TraceCore(gateway string, log *Log) zapcore.Core {
	return &traceCore{gateway: gateway, log: log}
}

type traceCore struct {
	gateway string
	log     *Log
	fields  []zapcore.Field
}

func isTrace(e zapcore.Entry) bool {
	return (e.LoggerName == "trace" || strings.HasSuffix(e.LoggerName, ".trace")) && strings.HasPrefix(e.Message, "fetch")
}

// Enabled is true at every level: the gateway forces its trace lines
// through whatever the level, and Check picks them by logger name.
func (c *traceCore) Enabled(zapcore.Level) bool { return true }

func (c *traceCore) With(fields []zapcore.Field) zapcore.Core {
	return &traceCore{gateway: c.gateway, log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *traceCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if isTrace(e) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *traceCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if !isTrace(e) {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	m := enc.Fields
	started, _ := m["started"].(time.Time)
	elapsed, _ := m["elapsed"].(time.Duration)
	f := Fetch{
		Gateway: c.gateway,
		Key:     PartitionKey{Group: str(m["group"]), Topic: str(m["topic"]), Partition: int32(num(m["partition"]))},
		Holder:  str(m["holder"]), Epoch: uint64(num(m["epoch"])), JTI: str(m["jti"]), Outcome: str(m["outcome"]),
		Records: int(num(m["records"])), Offset: num(m["offset"]), Next: num(m["next_offset"]),
		Start: FromWall(started),
	}
	f.End = f.Start.Add(elapsed)
	c.log.AddFetch(f)
	return nil
}

func (c *traceCore) Sync() error { return nil }

func str(v any) string {
	s, _ := v.(string)
	return s
}

// num reads an integer a MapObjectEncoder stored (any integer type) or
// JSON decoded (float64).
func num(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint64:
		return int64(n)
	case uint32:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// jsonTrace is a trace line of a gateway process (zap's production JSON
// encoder: times and durations in float seconds).
type jsonTrace struct {
	Logger     string  `json:"logger"`
	Msg        string  `json:"msg"`
	JTI        string  `json:"jti"`
	Holder     string  `json:"holder"`
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Epoch      uint64  `json:"epoch"`
	Outcome    string  `json:"outcome"`
	Records    int     `json:"records"`
	Offset     int64   `json:"offset"`
	NextOffset int64   `json:"next_offset"`
	Started    float64 `json:"started"`
	Elapsed    float64 `json:"elapsed"`
}

// ParseTraceLine reads one JSON log line of a gateway process; ok is
// false for lines that are not fetch trace lines.
func ParseTraceLine(gateway string, line []byte) (Fetch, bool) {
	if !strings.Contains(string(line), `"trace"`) {
		return Fetch{}, false
	}
	var j jsonTrace
	if err := json.Unmarshal(line, &j); err != nil || !isTrace(zapcore.Entry{LoggerName: j.Logger, Message: j.Msg}) {
		return Fetch{}, false
	}
	sec := int64(j.Started)
	start := FromWall(time.Unix(sec, int64((j.Started-float64(sec))*1e9)))
	return Fetch{
		Gateway: gateway, Key: PartitionKey{Group: j.Group, Topic: j.Topic, Partition: j.Partition},
		Holder: j.Holder, Epoch: j.Epoch, JTI: j.JTI, Outcome: j.Outcome, Records: j.Records,
		Offset: j.Offset, Next: j.NextOffset, Start: start, End: start.Add(time.Duration(j.Elapsed * 1e9)),
	}, true
}
