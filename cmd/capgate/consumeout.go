package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

// writeTextRecord writes "topic/partition<TAB>offset<TAB>key<TAB>value".
// Keys and values that are not printable UTF-8 on one line are quoted Go
// style; use --format json for exact bytes.
func writeTextRecord(w *bufio.Writer, r *client.Record) error {
	w.WriteString(r.Topic)
	w.WriteByte('/')
	w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
	w.WriteByte('\t')
	w.WriteString(strconv.FormatInt(r.Offset, 10))
	w.WriteByte('\t')
	w.WriteString(printable(r.Key))
	w.WriteByte('\t')
	w.WriteString(printable(r.Value))
	return w.WriteByte('\n')
}

func printable(b []byte) string { return quoteUnsafe(string(b)) }

// jsonRecord is one line of --format json. Key and value are strings when
// they are valid UTF-8 (key null when the record has none); otherwise
// key_base64/value_base64 carry the bytes.
type jsonRecord struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   string       `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   []byte       `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 []byte       `json:"value_base64,omitempty"`
	Headers     []jsonHeader `json:"headers,omitempty"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func writeJSONRecord(w *bufio.Writer, r *client.Record) error {
	out := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	out.Key, out.KeyBase64 = textOrBytes(r.Key)
	out.Value, out.ValueBase64 = textOrBytes(r.Value)
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, jsonHeader{Key: h.Key, Value: string(h.Value)})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	w.Write(b)
	return w.WriteByte('\n')
}

func textOrBytes(b []byte) (*string, []byte) {
	switch {
	case b == nil:
		return nil, nil
	case utf8.Valid(b):
		s := string(b)
		return &s, nil
	}
	return nil, b
}

// progress keeps one status line on a terminal's stderr ("1234 records,
// 56 rec/s, lag 7"), cleared while records are printed. Off the terminal
// it only counts.
type progress struct {
	w  io.Writer
	on bool

	mu      sync.Mutex
	total   int64
	rate    float64
	lag     string
	started time.Time
	drawn   bool
}

func newProgress(w io.Writer, on bool) *progress {
	return &progress{w: w, on: on, lag: "?", started: time.Now()}
}

// records runs print (which writes n records to stdout) with the status
// line cleared, then draws it again.
func (p *progress) records(n int, print func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	err := print()
	p.total += int64(n)
	p.drawLocked()
	return err
}

func (p *progress) clearLocked() {
	if p.on && p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *progress) drawLocked() {
	if !p.on {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%d records, %.0f rec/s, lag %s", p.total, p.rate, p.lag)
	p.drawn = true
}

// run updates the rate every second and the lag every 2 s from lag (nil:
// no lag source). The returned stop clears the line and prints the total.
func (p *progress) run(ctx context.Context, lag func(context.Context) (int64, error)) (stop func()) {
	if !p.on {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.loop(ctx, lag)
	}()
	return func() {
		cancel()
		<-done
		p.mu.Lock()
		defer p.mu.Unlock()
		p.clearLocked()
		fmt.Fprintf(p.w, "%d records in %s\n", p.total, time.Since(p.started).Round(time.Millisecond))
	}
}

func (p *progress) loop(ctx context.Context, lag func(context.Context) (int64, error)) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(0), time.Now()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			text := ""
			if lag != nil && i%2 == 0 {
				if n, err := lag(ctx); err == nil {
					text = strconv.FormatInt(n, 10)
				}
			}
			p.mu.Lock()
			p.rate = float64(p.total-last) / now.Sub(lastAt).Seconds()
			last, lastAt = p.total, now
			if text != "" {
				p.lag = text
			}
			p.clearLocked()
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

// lagSource sums the group's lag from the admin API (the SDK does not
// expose high watermarks); nil without an admin token.
func (f *consumeFlags) lagSource(cfg client.Config) func(context.Context) (int64, error) {
	token := f.adminToken()
	if token == "" {
		return nil
	}
	hc, err := f.endpoints.tls.httpClient(5 * time.Second)
	if err != nil {
		return nil
	}
	admin, err := newAdminClient(strings.Join(append([]string{cfg.CoordinatorURL}, cfg.CoordinatorURLs...), ","), token, hc)
	if err != nil {
		return nil
	}
	return func(ctx context.Context) (int64, error) {
		var desc coordinator.GroupDescription
		if err := admin.do(ctx, http.MethodGet, "/v1/admin/groups/"+url.PathEscape(cfg.Group), nil, &desc); err != nil {
			return 0, err
		}
		var total int64
		for _, p := range desc.Partitions {
			if p.Lag != nil {
				total += *p.Lag
			}
		}
		return total, nil
	}
}
