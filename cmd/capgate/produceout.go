package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// errInterrupted ends a produce stopped by Ctrl-C (SIGINT) or SIGTERM.
// It exits 1, the CLI's status for a failure of the work (usage.go's
// exitCode knows 1 and 2); a shell's 130 would need a case there.
var errInterrupted = errors.New("interrupted")

// ended is the error a produce ends with after err, once what was
// written is summed up (summary: stderr, and stdout with -o json): a
// failure after records were written (a record too large, a refusal, a
// gateway that stayed away) said only "after N records" and printed no
// summary and no JSON, so a script could not tell which were written
// (newuser4 #12). When ctx ended (Ctrl-C) the error says so —
// "interrupted, nothing sent" while it waited on stdin — instead of
// "context canceled", which read like a failure of the gateway.
func (p *producer) ended(ctx context.Context, stdout, stderr io.Writer, err error) error {
	if ctx.Err() == nil {
		if p.total() > 0 {
			p.summary(stdout, stderr)
		}
		return err
	}
	if p.total() == 0 && errors.Is(err, ctx.Err()) && !p.sending {
		return fmt.Errorf("produce: %w, nothing sent", errInterrupted)
	}
	p.summary(stdout, stderr)
	if p.sending {
		return fmt.Errorf("produce: %w while sending (those records may or may not be written; the ones above were): %w", errInterrupted, err)
	}
	return fmt.Errorf("produce: %w after %s (written: see above)", errInterrupted, recordCount(p.total()))
}

// recordCount is "1 record" or "n records".
func recordCount(n int) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

// producedJSON is what -o json prints: what was written, for scripts.
type producedJSON struct {
	Topic      string              `json:"topic"`
	Records    int                 `json:"records"`
	Partitions []producedPartition `json:"partitions"`
}

type producedPartition struct {
	Partition  int32 `json:"partition"`
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"`
	Count      int   `json:"count"`
}

// writeJSON prints what was written as one JSON object.
func (p *producer) writeJSON(stdout io.Writer) error {
	out := producedJSON{Topic: p.f.topic, Records: p.total(), Partitions: []producedPartition{}}
	for _, part := range slices.Sorted(maps.Keys(p.counts)) {
		w := p.counts[part]
		out.Partitions = append(out.Partitions, producedPartition{Partition: part, BaseOffset: w.first, LastOffset: w.last, Count: w.count})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
