package stack

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBuilt() // BuildOnce's capgate binary, shared by the process tests
	os.Exit(code)
}

// TestStackEndToEnd builds a stack with two brokers and two gateways in
// this process, produces through Kafka, consumes with StartConsumer, and
// checks that every acknowledged record arrives once; then the
// coordinator is killed and started again on the same address and data
// directory, and the consumer's group is still known.
func TestStackEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"orders": 4}, Brokers: 2, Gateways: 2, Timing: TestTiming()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if n := len(s.Kafka.Addrs()); n != 2 {
		t.Fatalf("%d brokers, want 2", n)
	}
	cred, err := s.ClientCredential(ctx, "test", []string{"g"}, []string{"orders"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked, seen := map[[2]int64]bool{}, map[[2]int64]int{}
	prod := s.StartProducer(ProducerOptions{Topic: "orders", Partitions: 4, OnAck: func(p int32, o int64, _ *kgo.Record, _ time.Time) {
		mu.Lock()
		acked[[2]int64{int64(p), o}] = true
		mu.Unlock()
	}})
	c, err := StartConsumer(ctx, ConsumerOptions{Config: s.ClientConfig("g", []string{"orders"}, cred), CommitEvery: 100 * time.Millisecond,
		OnRecords: func(_ string, rs []client.Record, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				seen[[2]int64{int64(r.Partition), r.Offset}]++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let records flow: the load's length, not a wait
	prod.Stop()
	if prod.Count() == 0 {
		t.Fatal("nothing produced")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for k := range acked {
			if seen[k] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged records never consumed", missing, len(acked))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%v consumed %d times", k, n)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}

	co := s.Coordinator()
	addr := co.Addr
	co.Kill()
	if status, err := s.get(ctx, co.URL+"/healthz"); err == nil {
		t.Fatalf("killed coordinator still answers: %d", status)
	}
	if err := co.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if co.Addr != addr {
		t.Fatalf("restarted on %s, want %s", co.Addr, addr)
	}
	if _, err := s.Describe(ctx, "g"); err != nil {
		t.Fatalf("the group is gone after the restart: %v", err)
	}
	seq, err := s.SyncSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, why, err := s.Acked(ctx, seq)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateways did not resync after the restart: %s %v", why, err)
		}
	}
}

// TestStackRefusesWhatItCannotBuild: a process part needs the binary,
// and an inconsistent timing is refused.
func TestStackRefusesWhatItCannotBuild(t *testing.T) {
	ctx := context.Background()
	bad := TestTiming()
	bad.SyncTimeout = bad.GatewayTimeout
	for name, opts := range map[string]Options{
		"no dir":            {},
		"process no binary": {Dir: t.TempDir(), CoordinatorProcess: true},
		"timing":            {Dir: t.TempDir(), Timing: bad},
	} {
		if s, err := Start(ctx, opts); err == nil {
			s.Close()
			t.Errorf("%s: started", name)
		}
	}
}

// TestProcessParts runs the coordinator and a gateway as `capgate`
// processes: the stack writes their config files, starts them, waits
// for them, forwards their log lines, and SIGKILL and a restart work.
func TestProcessParts(t *testing.T) {
	if ok, why := SignalsSupported(); !ok {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("builds the capgate binary")
	}
	bin, err := BuildOnce("./cmd/capgate") // one build for this package's process tests
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	lines, serving := map[string]int{}, map[string]string{}
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"t": 1}, Gateways: 1, Timing: TestTiming(),
		CoordinatorProcess: true, GatewayProcesses: true, Binary: bin,
		OnLine: func(part string, line []byte) {
			mu.Lock()
			defer mu.Unlock()
			lines[part]++
			if url := ServingURL(line); url != "" {
				serving[part] = url
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Coordinator().Process() == nil || s.Gateways()[0].Process() == nil {
		t.Fatal("parts are not processes")
	}
	mu.Lock()
	if lines["coordinator"] == 0 || lines["gateway-1"] == 0 {
		t.Errorf("log lines per part: %v, want some from each", lines)
	}
	if serving["coordinator"] != s.Coordinator().URL || serving["gateway-1"] != s.Gateways()[0].URL {
		t.Errorf("ServingURL of the parts' logs: %v, want %s and %s", serving, s.Coordinator().URL, s.Gateways()[0].URL)
	}
	mu.Unlock()
	g := s.Gateways()[0]
	g.Kill()
	if status, err := g.Ready(ctx); err == nil {
		t.Fatalf("killed gateway answers %d", status)
	}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if status, _, err := s.Admin(ctx, http.MethodGet, "/v1/admin/gateways", nil, nil); err != nil || status != http.StatusOK {
		t.Fatalf("admin API of the process coordinator: %d %v", status, err)
	}
}
