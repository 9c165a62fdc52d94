package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// The Kafka listener as deployed (BenchmarkDeployListener, issue #15):
// an unmodified kgo consumer in the load generator reads the listen topic
// through the gateway process's Kafka listener, and — its baseline in the
// same round — straight from the Kafka process. Unlike §8's benchmark
// (kfake, coordinator, gateway and client in one process), every part
// here is its own process, as deployed, and each one's CPU is read.

// listenPath is one way of reading the listen topic: straight to Kafka
// (Via nil) or through Via's Kafka listener.
type listenPath struct {
	Pair string // "1p" (one partition, assign mode) or "group" (KIP-848 group, every partition)
	Via  *procCapgate
}

func (p listenPath) name() string {
	if p.Via == nil {
		return p.Pair + "-direct"
	}
	return p.Pair + "-" + p.Via.Name
}

// listenFigure is one pass: records/s from creating the client to its
// last record, and each process's CPU per record over the pass.
type listenFigure struct {
	Records                      int
	PerSec                       float64
	Client, Gateway, Kafka, Coor time.Duration // CPU per record
}

// total is the CPU per record of every process of the pass.
func (f listenFigure) total() time.Duration { return f.Client + f.Gateway + f.Kafka + f.Coor }

// listenPass reads what path reads with a new kgo client (a new group
// for the group path: it starts from the beginning) after a garbage
// collection, and measures it.
func (d *procStack) listenPass(tb testing.TB, path listenPath) listenFigure {
	tb.Helper()
	v := path.Via
	want := d.size.ListenPerPart
	seeds := d.addrs
	opts := []kgo.Opt{kgo.ClientID("bench-" + path.name())}
	var token string
	if path.Pair == "group" {
		want *= int(d.size.ListenParts)
		group := "listen-" + path.name() + "-" + randomID()
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(deployListen),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ServerSideBalancer(), kgo.DisableAutoCommit())
		if v != nil {
			token = v.credential(tb, group)
		}
	} else {
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{deployListen: {0: kgo.NewOffset().AtStart()}}))
		if v != nil {
			token = v.caps[deployListen+"/0"]
		}
	}
	if v != nil {
		seeds = []string{v.KafkaAddr}
		opts = append(opts, kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token}, nil })))
	}
	opts = append(opts, kgo.SeedBrokers(seeds...))
	runtime.GC()
	self, gw, kafka, coor := selfCPU(), d.gatewaysCPU(tb), d.kafkaCPU(), d.coordinatorsCPU()
	start := time.Now()
	got := kgoReadAll(tb, path.name(), want, opts...)
	elapsed := time.Since(start)
	n := time.Duration(got)
	f := listenFigure{Records: got, PerSec: float64(got) / elapsed.Seconds(),
		Client: (selfCPU() - self) / n, Kafka: (d.kafkaCPU() - kafka) / n, Coor: (d.coordinatorsCPU() - coor) / n}
	if v != nil {
		// Only the listener's passes work a gateway (every gateway's CPU
		// is summed: the idle ones' is the noise floor); during a direct
		// pass theirs is idle noise, not a cost of the pass.
		f.Gateway = (d.gatewaysCPU(tb) - gw) / n
	}
	return f
}

// coordinatorsCPU is every variant's coordinator process's CPU time so
// far (the unreadable ones count 0).
func (d *procStack) coordinatorsCPU() time.Duration {
	var total time.Duration
	for _, v := range d.variants {
		c, _ := processCPU(v.coordinator.Pid())
		total += c
	}
	return total
}

// listeners are the variants whose gateway runs the Kafka listener.
func (d *procStack) listeners() []*procCapgate {
	var out []*procCapgate
	for _, v := range d.variants {
		if v.KafkaAddr != "" {
			out = append(out, v)
		}
	}
	return out
}

// listenRound is one round: for each pair, the direct pass and one pass
// through each listener, back to back, which one first rotating with the
// round.
func (d *procStack) listenRound(tb testing.TB, round int) map[string]listenFigure {
	out := map[string]listenFigure{}
	for _, pair := range []string{"1p", "group"} {
		paths := []listenPath{{Pair: pair}}
		for _, v := range d.listeners() {
			paths = append(paths, listenPath{Pair: pair, Via: v})
		}
		k := round % len(paths)
		for _, p := range append(paths[k:], paths[:k]...) {
			out[p.name()] = d.listenPass(tb, p)
		}
	}
	return out
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// listenRows are one round's table rows: each path's records/s, its
// ratio to the direct pass of its pair, and its CPU per record.
func (d *procStack) listenRows(r map[string]listenFigure) [][]string {
	var rows [][]string
	for _, pair := range []string{"1p", "group"} {
		direct := r[pair+"-direct"]
		names := []string{pair + "-direct"}
		for _, v := range d.listeners() {
			names = append(names, pair+"-"+v.Name)
		}
		for _, name := range names {
			f := r[name]
			ns := func(d time.Duration) string { return fmt.Sprint(d.Nanoseconds()) }
			rows = append(rows, []string{name, fmt.Sprint(f.Records), fmt.Sprintf("%.2f M", f.PerSec/1e6), ratio(f.PerSec, direct.PerSec),
				ns(f.Client), ns(f.Gateway), ns(f.Kafka), ns(f.Coor), ns(f.total()), ratio(float64(f.total()), float64(direct.total()))})
		}
	}
	return rows
}

// listenHeader is listenRows' header.
var listenHeader = []string{"path", "records", "records/s", "× direct", "load generator ns/record", "gateways", "Kafka", "coordinators", "all", "all × direct"}
