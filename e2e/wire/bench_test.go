package wire_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/stack"
)

// benchStack is one stack of the TLS benchmark and its clients.
type benchStack struct {
	name    string
	s       *stack.Stack
	keep    *http.Client // keep-alive
	fresh   *http.Client // a new connection per request
	fetch   string       // capability: fetch on both partitions' topic
	gateway string
}

func startBenchStack(b *testing.B, tls bool) *benchStack {
	b.Helper()
	dir := b.TempDir()
	opts := stack.Options{Dir: dir, Topics: map[string]int32{topic: 2}, Gateways: 1}
	bs := &benchStack{name: "plaintext"}
	var pki *stack.PKI
	if tls {
		var err error
		if pki, err = stack.NewPKI(dir); err != nil {
			b.Fatal(err)
		}
		if err := pki.Apply(&opts); err != nil {
			b.Fatal(err)
		}
		bs.name = "tls"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	bs.s, bs.gateway = s, s.GatewayURLs()[0]
	bs.keep, bs.fresh = &http.Client{Timeout: 30 * time.Second}, &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if tls {
		if bs.keep, err = pki.HTTPClient("", 30*time.Second); err != nil {
			b.Fatal(err)
		}
		tr := bs.keep.Transport.(*http.Transport).Clone()
		tr.DisableKeepAlives = true
		bs.fresh = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	}
	return bs
}

// grant mints a fetch capability for partition p.
func (bs *benchStack) grant(b *testing.B, p int32) string {
	var c api.CapabilityResponse
	if err := bs.s.MustAdmin(context.Background(), http.MethodPost, "/v1/admin/capabilities",
		coordinator.SharedGrantRequest{Topic: topic, Partition: p, Ops: []string{"fetch"}, TTLMs: 600_000, Holder: "bench"}, &c); err != nil {
		b.Fatal(err)
	}
	return c.Capability
}

// fill produces n records of size bytes to partition p, in batches.
func (bs *benchStack) fill(b *testing.B, p int32, n, size int) {
	value := make([]byte, size)
	for done := 0; done < n; {
		batch := make([]*kgo.Record, 0, 1000)
		for ; done < n && len(batch) < 1000; done++ {
			batch = append(batch, &kgo.Record{Value: value})
		}
		if _, err := bs.s.Broker.Produce(context.Background(), topic, p, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// fetch sends one fetch and returns the next offset.
func fetchOnce(b *testing.B, hc *http.Client, url, capability string, raw bool) int64 {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+capability)
	if raw {
		req.Header.Set("Accept", api.MediaRecordBatch)
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("fetch %s: %d", url, resp.StatusCode)
	}
	next, err := strconv.ParseInt(resp.Header.Get(api.HeaderNextOffset), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return next
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkTLSOverhead puts a plaintext and a TLS stack side by side in
// one run (same binary, same machine, interleaved rounds): the latency of
// one sequential 1-record fetch on a kept-alive connection and on a new
// connection per fetch (the handshake), and records/s of one consumer
// reading 100-byte records through raw record batches and JSON. Run with
// -benchtime=1x; -short shrinks it.
func BenchmarkTLSOverhead(b *testing.B) {
	latencyFetches, freshFetches, records, passFor := 4000, 400, 200_000, time.Second
	if testing.Short() {
		latencyFetches, freshFetches, records, passFor = 400, 50, 20_000, 100*time.Millisecond
	}
	stacks := []*benchStack{startBenchStack(b, false), startBenchStack(b, true)}
	for _, bs := range stacks {
		bs.fill(b, 0, 1, 100)
		bs.fill(b, 1, records, 100)
	}
	caps := map[string][2]string{}
	for _, bs := range stacks {
		caps[bs.name] = [2]string{bs.grant(b, 0), bs.grant(b, 1)}
	}
	for b.Loop() {
		keep, fresh := map[string][]time.Duration{}, map[string][]time.Duration{}
		const rounds = 20
		for range rounds {
			for _, bs := range stacks {
				url := bs.gateway + "/v1/topics/" + topic + "/partitions/0/records?offset=0&max_bytes=1024"
				for range latencyFetches / rounds {
					start := time.Now()
					fetchOnce(b, bs.keep, url, caps[bs.name][0], false)
					keep[bs.name] = append(keep[bs.name], time.Since(start))
				}
				for range freshFetches / rounds {
					start := time.Now()
					fetchOnce(b, bs.fresh, url, caps[bs.name][0], false)
					fresh[bs.name] = append(fresh[bs.name], time.Since(start))
				}
			}
		}
		rate := map[string]float64{}
		for pass := range 6 { // plaintext, tls, … three each per format; best kept
			for _, raw := range []bool{true, false} {
				bs := stacks[pass%2]
				key := bs.name + map[bool]string{true: "-raw", false: "-json"}[raw]
				// Whole reads of the partition for at least passFor.
				start, read := time.Now(), 0
				for time.Since(start) < passFor {
					for next := int64(0); next < int64(records); {
						next = fetchOnce(b, bs.keep, fmt.Sprintf("%s/v1/topics/%s/partitions/1/records?offset=%d&max_bytes=1048576", bs.gateway, topic, next), caps[bs.name][1], raw)
					}
					read += records
				}
				rate[key] = max(rate[key], float64(read)/time.Since(start).Seconds())
			}
		}
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		b.ReportMetric(0, "ns/op")
		for _, name := range []string{"plaintext", "tls"} {
			b.ReportMetric(us(percentile(keep[name], 0.5)), name+"-p50-µs")
			b.ReportMetric(us(percentile(keep[name], 0.99)), name+"-p99-µs")
			b.ReportMetric(us(percentile(fresh[name], 0.5)), name+"-newconn-p50-µs")
			b.ReportMetric(rate[name+"-raw"], name+"-raw-records/s")
			b.ReportMetric(rate[name+"-json"], name+"-json-records/s")
		}
		ratio := func(a, b float64) float64 { return a / b }
		fmt.Printf("TLS vs plaintext (same run): keep-alive fetch p50 %.0f vs %.0f µs (×%.2f), p99 %.0f vs %.0f µs; new connection p50 %.0f vs %.0f µs (×%.2f); raw %.0f vs %.0f records/s (×%.2f); JSON %.0f vs %.0f records/s (×%.2f)\n",
			us(percentile(keep["tls"], 0.5)), us(percentile(keep["plaintext"], 0.5)), ratio(us(percentile(keep["tls"], 0.5)), us(percentile(keep["plaintext"], 0.5))),
			us(percentile(keep["tls"], 0.99)), us(percentile(keep["plaintext"], 0.99)),
			us(percentile(fresh["tls"], 0.5)), us(percentile(fresh["plaintext"], 0.5)), ratio(us(percentile(fresh["tls"], 0.5)), us(percentile(fresh["plaintext"], 0.5))),
			rate["tls-raw"], rate["plaintext-raw"], ratio(rate["tls-raw"], rate["plaintext-raw"]),
			rate["tls-json"], rate["plaintext-json"], ratio(rate["tls-json"], rate["plaintext-json"]))
	}
}
