package kafkaclients

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a throughput pass does on the wire, counted on both sides of the
// gateway so that a listener pass and its direct baseline can be compared
// request by request: the kgo client's Fetches (what it sent and read,
// the batches it decoded) and the Fetches kfake handled (from the client
// on a direct pass, from the gateway on a listener pass).

// The counters of a pass, indexes into wireCounts.
const (
	clientFetches   = iota // Fetch answers the client read
	clientReadBytes        // their bytes
	clientReqBytes         // the Fetch requests' bytes
	clientBatches          // record batches the client decoded
	kafkaFetches           // Fetch requests kfake handled
	kafkaParts             // partitions they named
	kafkaMaxBytes          // their MaxBytes, summed
	kafkaPartBytes         // their partitions' PartitionMaxBytes, summed
	kafkaSession           // of them, in a fetch session (KIP-227)
	kafkaCommitted         // of them, read_committed
	kafkaNoWait            // of them, MaxWaitMillis 0
	minorFaults            // the process's page faults (getrusage)
	switches               // its context switches, voluntary and not
	nWire
)

// wireCounts are the counters of one pass (or of several, summed).
type wireCounts [nWire]int64

func (w *wireCounts) add(o wireCounts, sign int64) {
	for i := range w {
		w[i] += sign * o[i]
	}
}

// wireCounter counts, atomically: the client side through kgo hooks, the
// Kafka side through a kfake control function that only observes.
type wireCounter struct{ c [nWire]atomic.Int64 }

// watchKafka counts every Fetch the cluster handles from now on.
func (w *wireCounter) watchKafka(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		w.c[kafkaFetches].Add(1)
		w.c[kafkaMaxBytes].Add(int64(req.MaxBytes))
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				w.c[kafkaParts].Add(1)
				w.c[kafkaPartBytes].Add(int64(p.PartitionMaxBytes))
			}
		}
		for i, yes := range map[int]bool{kafkaSession: req.SessionEpoch >= 0, kafkaCommitted: req.IsolationLevel == 1, kafkaNoWait: req.MaxWaitMillis == 0} {
			if yes {
				w.c[i].Add(1)
			}
		}
		return nil, nil, false
	})
}

func (w *wireCounter) snapshot() wireCounts {
	var out wireCounts
	for i := range out {
		out[i] = w.c[i].Load()
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out[minorFaults], out[switches] = ru.Minflt, ru.Nvcsw+ru.Nivcsw
	return out
}

// The kgo hooks (a client's Fetches and batches).
func (w *wireCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		w.c[clientFetches].Add(1)
		w.c[clientReadBytes].Add(int64(bytes))
	}
}

func (w *wireCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		w.c[clientReqBytes].Add(int64(bytes))
	}
}

func (w *wireCounter) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	w.c[clientBatches].Add(1)
}

// printWire prints, per path, what its passes did on the wire (summed
// over the counted rounds, per second of pass and per Fetch).
func (r *throughputResult) printWire() {
	fmt.Printf("\n| path (all counted rounds) | client Fetches/s | KiB per answer | batches per answer | request bytes | Kafka Fetches per client Fetch | partitions per Kafka Fetch | Kafka MaxBytes KiB / per partition | in a session / read_committed / no wait | page faults per M records | context switches per M records |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pr := range r.pairs {
		for _, p := range []*throughputPath{pr.direct, pr.listener} {
			w, f := p.wire, float64(max(p.wire[clientFetches], 1))
			kf := float64(max(w[kafkaFetches], 1))
			perM := float64(p.records*len(p.rps)) / 1e6
			fmt.Printf("| %s | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f | %.0f / %.0f | %d / %d / %d | %.0f | %.0f |\n", p.path,
				f/p.seconds, float64(w[clientReadBytes])/f/1024, float64(w[clientBatches])/f, float64(w[clientReqBytes])/f,
				float64(w[kafkaFetches])/f, float64(w[kafkaParts])/kf, float64(w[kafkaMaxBytes])/kf/1024,
				float64(w[kafkaPartBytes])/float64(max(w[kafkaParts], 1))/1024, w[kafkaSession], w[kafkaCommitted], w[kafkaNoWait],
				float64(w[minorFaults])/perM, float64(w[switches])/perM)
		}
	}
}

// profilePass starts a CPU profile of one pass when
// CAPGATE_BENCH_PROFILE_DIR is set (one file per path and round, so a
// listener pass and its direct baseline are profiled apart); the returned
// function stops it.
func profilePass(b testing.TB, name string, round int) func() {
	dir := os.Getenv("CAPGATE_BENCH_PROFILE_DIR")
	if dir == "" || round < 0 {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, round)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}
