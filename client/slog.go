package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithSlog logs through l, a log/slog logger (slog.Default() for the
// standard library's default, which prints INFO and above on stderr):
// the SDK's lines keep their message and fields, as slog attributes
// (strings, numbers, durations as slog Durations, errors as their text,
// lists as lists, any other value as its JSON), at
// slog's levels (zap's Debug, Info, Warn, Error; anything above Error is
// Error), with the SDK's source position for a handler that adds one.
// It replaces WithLogger, and the last of the two wins. Tokens and the
// credential are never logged.
func WithSlog(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			o.log = zap.NewNop()
			return
		}
		o.log = zap.New(slogCore{h: l.Handler()}, zap.AddCaller())
	}
}

// slogCore is a zapcore.Core writing to a slog.Handler: the SDK logs
// through zap everywhere (the coordinator and gateway share its logging),
// and a Go program built on log/slog hands its own logger in. No module
// among those the project may use adapts this way round (go.uber.org/zap/exp's
// zapslog is slog's API over a zap core, not a zap core over slog's
// handler).
type slogCore struct {
	h slog.Handler
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return slogCore{h: c.h.WithAttrs(slogAttrs(fields))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, e.Caller.PC)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(slogAttrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

// slogLevel maps zap's levels to slog's: DPanic, Panic and Fatal (the SDK
// logs none) are Error.
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// slogAttrs encodes fields in their order, each as zap's map encoder
// gives it (an error as its text under "error", a duration as a slog
// Duration, arrays and objects as slices and maps), but for zap.Any's
// values of no zap type (reflectedValue).
func slogAttrs(fields []zapcore.Field) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		if f.Type == zapcore.ReflectType {
			attrs = append(attrs, slog.Any(f.Key, reflectedValue(f.Interface)))
			continue
		}
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for _, k := range slices.Sorted(maps.Keys(enc.Fields)) { // one key, but for an error's "errorVerbose"
			attrs = append(attrs, slog.Any(k, enc.Fields[k]))
		}
	}
	return attrs
}

// reflectedValue is what a handler prints of v, a zap.Any value of no zap
// type: a Stringer's or error's text; a kind slog knows (numbers,
// strings, times, durations) as it is; anything else — structs, their
// slices and maps — as its JSON, which a JSON handler writes inline and a
// text handler as one string: handed as it was, the text handler printed
// Go's syntax ({Topic:orders Partition:3}) of SDK types.
func reflectedValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case fmt.Stringer:
		return x.String()
	case error:
		return x.Error()
	}
	if k := slog.AnyValue(v).Kind(); k != slog.KindAny {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return jsonText(b)
}

// jsonText is a value's JSON: inline for a JSON handler, text for others.
type jsonText []byte

func (j jsonText) MarshalJSON() ([]byte, error) { return j, nil }
func (j jsonText) MarshalText() ([]byte, error) { return j, nil }
