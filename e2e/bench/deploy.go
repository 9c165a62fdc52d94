package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// The deployment-shaped stack: every part its own process, as in
// production. A Kafka process (benchkafka: kfake with several brokers),
// and for each capgate binary under test a coordinator process and a
// gateway process started from that binary. The benchmark process is the
// load generator and nothing else: its direct franz-go client and its
// HTTP clients talk to the other processes over loopback.

// baselineEnv names a capgate binary built from an earlier commit; when
// set, the deployment benchmark runs it side by side with the binary of
// the working tree (BENCHMARKS.md has the commands).
const baselineEnv = "CAPGATE_BENCH_BASELINE_BIN"

// extraEnv names more binaries to run side by side, as name=path pairs
// separated by commas (say "main=/tmp/main.bin": the main a branch
// started from). Like the baseline's, their profiles need the patch of
// BENCHMARKS.md.
const extraEnv = "CAPGATE_BENCH_EXTRA_BINS"

// noMergeEnv, when set, adds the variant "nomerge": this tree's binary
// with broker.merge_fetches_after 0 (every fetch its own Kafka Fetch), an
// A/B of merging within one binary.
const noMergeEnv = "CAPGATE_BENCH_NOMERGE"

// noAheadEnv, when set, adds the variant "noahead": this tree's binary
// with broker.read_ahead_bytes 0 (every small fetch its own Kafka
// exchange, as before read-ahead), an A/B of the read-ahead in the same
// rounds.
const noAheadEnv = "CAPGATE_BENCH_NOAHEAD"

// oneLaneEnv, when set with the listen topic, adds the variant "onelane":
// this tree's binary with its Kafka listener at kafka_fetch_lanes 1 (one
// Fetch in flight per group client, as before lanes), an A/B of the
// lanes in the same rounds (BenchmarkDeployListener).
const oneLaneEnv = "CAPGATE_BENCH_ONE_LANE"

// oneProcEnv, when set, adds the variant "oneproc": this tree's binary
// with its gateway at GOMAXPROCS=1 (one P: a thread that finds work in
// the network poller never wakes a second, spinning one for the idle P),
// an A/B of Go's scheduler wake-ups on a one-at-a-time fetch's placement
// (BENCHMARKS.md §0, "Thirty-third pass"). Not a setting to deploy: one P
// caps the gateway at one core.
const oneProcEnv = "CAPGATE_BENCH_ONE_PROC"

// sdkFetchBytesEnv, when set to a byte count, adds a scan reader: the
// SDK through the working tree's gateway with client.fetch_max_bytes
// that large (an A/B of the SDK's fetch size in the same rounds).
const sdkFetchBytesEnv = "CAPGATE_BENCH_SDK_FETCH_BYTES"

// Topics of the deployment: single-record batches for 1-record fetches,
// 100-byte records in large batches for consumers, and an idle topic the
// long polls wait on.
const (
	deployLatency = "latency"
	deployBulk    = "bulk"
	deployIdle    = "idle"
	// deploySpread has several partitions per broker, single-record
	// batches like latency: the shape in which concurrent fetches of
	// different partitions share a broker (and the gateway may merge
	// them into one Kafka Fetch).
	deploySpread = "spread"
	// deployListen holds 100-byte records for kgo consumers reading
	// through the gateway's Kafka listener (BenchmarkDeployListener);
	// only created when deploySize.ListenParts > 0.
	deployListen = "listen"
)

// deploySize is how much the deployment loads.
type deploySize struct {
	Brokers        int
	LatencyParts   int32 // partitions of latency (one per broker)
	LatencyRecords int   // single-record batches per latency partition
	BulkParts      int32
	BulkPerPart    int   // 100-byte records per bulk partition
	SpreadParts    int32 // partitions of spread (several per broker)
	SpreadRecords  int   // single-record batches per spread partition
	// ListenParts > 0 adds the listen topic (ListenPerPart 100-byte
	// records per partition) and turns on the Kafka listener of the
	// working tree's gateway (BenchmarkDeployListener).
	ListenParts   int32
	ListenPerPart int
}

// buildBinaries builds what the deployment runs, once per benchmark
// process (stack.BuildOnce; TestMain removes them).
func buildBinaries(tb testing.TB) (capgate, kafka string) {
	tb.Helper()
	capgate, err := stack.BuildOnce("./cmd/capgate")
	if err != nil {
		tb.Fatal(err)
	}
	if kafka, err = stack.BuildOnce("./e2e/bench/cmd/benchkafka"); err != nil {
		tb.Fatal(err)
	}
	return capgate, kafka
}

// procStack is one Kafka process and the capgate deployments in front of
// it.
type procStack struct {
	size   deploySize
	addrs  []string
	kafka  *stack.Process
	direct *kgo.Client // the load generator's franz-go client
	// leaders maps topic/partition to the leader's node id.
	leaders   map[string]int32
	variants  []*procCapgate
	scans     int // rounds of scan so far: who reads first rotates
	loads     int // closed-loop phases so far: which path goes first rotates
	seqRounds int // sequential rounds so far: with seqRotateEnv, which path goes first rotates
	// joins are each variant's SDK scans' join times (scanSDK), in order.
	joins map[string][]time.Duration
	// scanCosts are each reader's CPU per record in the last scan.
	scanCosts map[string]scanCost
}

// procCapgate is one capgate binary running as a coordinator process and a
// gateway process.
type procCapgate struct {
	Name           string // "capgate", or "baseline" for the earlier binary
	bin            string
	CoordinatorURL string
	GatewayURL     string
	KafkaAddr      string // the gateway's Kafka listener, "" when off
	adminToken     string
	syncToken      string
	coordinator    *stack.Process
	gateway        *stack.Process
	pprofAddr      string // "" when the binary cannot serve profiles
	hc             *fasthttp.HostClient
	caps           map[string]string // topic/partition -> fetch capability
}

// startDeployment starts the Kafka process, loads the topics and starts
// the working tree's capgate and, with CAPGATE_BENCH_BASELINE_BIN, the
// baseline binary.
func startProcStack(tb testing.TB, size deploySize) *procStack {
	tb.Helper()
	capgate, kafkaBin := buildBinaries(tb)
	d := &procStack{size: size, leaders: map[string]int32{}}
	topics := fmt.Sprintf("%s:%d,%s:%d,%s:%d,%s:%d", deployLatency, size.LatencyParts, deployBulk, size.BulkParts, deployIdle, size.LatencyParts,
		deploySpread, size.SpreadParts)
	if size.ListenParts > 0 {
		topics += fmt.Sprintf(",%s:%d", deployListen, size.ListenParts)
	}
	var err error
	d.kafka, d.addrs, err = stack.StartKafkaProcess(context.Background(), "kafka", kafkaBin,
		[]string{"-brokers", strconv.Itoa(size.Brokers), "-topics", topics}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopProcess(d.kafka) })
	d.direct, err = kgo.NewClient(kgo.SeedBrokers(d.addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.direct.Close)
	d.loadLeaders(tb)
	d.load(tb)
	d.variants = append(d.variants, d.start(tb, "capgate", capgate))
	if os.Getenv(noMergeEnv) != "" {
		d.variants = append(d.variants, d.start(tb, "nomerge", capgate))
	}
	if os.Getenv(noAheadEnv) != "" {
		d.variants = append(d.variants, d.start(tb, "noahead", capgate))
	}
	if os.Getenv(oneProcEnv) != "" {
		d.variants = append(d.variants, d.start(tb, "oneproc", capgate))
	}
	if os.Getenv(oneLaneEnv) != "" && size.ListenParts > 0 {
		d.variants = append(d.variants, d.start(tb, "onelane", capgate))
	}
	if bin := os.Getenv(baselineEnv); bin != "" {
		d.variants = append(d.variants, d.start(tb, "baseline", bin))
	}
	for _, pair := range strings.Split(os.Getenv(extraEnv), ",") {
		if pair == "" {
			continue
		}
		name, bin, ok := strings.Cut(pair, "=")
		if !ok || name == "" || bin == "" || name == "capgate" || name == "baseline" || strings.ContainsAny(name, "-/ ") {
			tb.Fatalf("%s: %q is not name=path (name not capgate or baseline, without - / or space)", extraEnv, pair)
		}
		d.variants = append(d.variants, d.start(tb, name, bin))
	}
	return d
}

// stopProcess ends p with SIGTERM, and SIGKILL if it lingers.
func stopProcess(p *stack.Process) { _ = p.Terminate(10 * time.Second) }

// load writes the topics: every latency partition LatencyRecords
// single-record batches (every spread partition SpreadRecords), every
// bulk partition BulkPerPart records of 100 bytes.
func (d *procStack) load(tb testing.TB) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	single := func(topic string, parts int32, records int) {
		// One partition after another, each record its own batch; the
		// partitions in parallel would batch records.
		for p := range parts {
			for i := range records {
				rec := &kgo.Record{Topic: topic, Partition: p, Key: []byte(strconv.Itoa(i)), Value: []byte("one record, one batch")}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					tb.Fatalf("produce %s/%d: %v", topic, p, err)
				}
			}
		}
	}
	single(deployLatency, d.size.LatencyParts, d.size.LatencyRecords)
	single(deploySpread, d.size.SpreadParts, d.size.SpreadRecords)
	cl.Close()
	produceBulk(tb, d.addrs, deployBulk, d.size.BulkParts, d.size.BulkPerPart, 100)
	if d.size.ListenParts > 0 {
		produceBulk(tb, d.addrs, deployListen, d.size.ListenParts, d.size.ListenPerPart, 100)
	}
}

// loadLeaders asks the metadata who leads each partition.
func (d *procStack) loadLeaders(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		resp, err := metadata(ctx, d.direct)
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					d.leaders[*t.Topic+"/"+strconv.Itoa(int(p.Partition))] = p.Leader
				}
			}
			if len(d.leaders) > 0 {
				return
			}
		}
		if ctx.Err() != nil {
			tb.Fatalf("metadata: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start runs bin as a coordinator and a gateway and grants a fetch
// capability for every latency, idle and spread partition. Their ports
// are found free, closed and written into config files (every version a
// benchmark runs, a baseline too, takes a fixed listen address), so a
// test running beside this one can take one first: a start that failed
// "address already in use" is tried again on other free ports.
func (d *procStack) start(tb testing.TB, name, bin string) *procCapgate {
	tb.Helper()
	var v *procCapgate
	for attempt := 1; ; attempt++ {
		var err error
		if v, err = d.launch(tb, name, bin); err == nil {
			break
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 5 {
			tb.Fatal(err)
		}
		tb.Logf("%s (attempt %d): a port was taken before the process bound it; again on others: %v", name, attempt, err)
	}
	for p := range d.size.LatencyParts {
		v.grant(tb, deployLatency, p, "latency-reader")
		v.grant(tb, deployIdle, p, "idle-poller")
	}
	for p := range d.size.SpreadParts {
		// One holder per partition, as a consumer group's members would
		// be (the per-holder in-flight cap is per holder).
		v.grant(tb, deploySpread, p, "spread-reader-"+strconv.Itoa(int(p)))
	}
	if v.KafkaAddr != "" {
		v.grant(tb, deployListen, 0, "listen-reader")
	}
	return v
}

// launch is one attempt of start: the coordinator and gateway processes,
// on ports found free now, both serving (or both stopped and why not).
func (d *procStack) launch(tb testing.TB, name, bin string) (*procCapgate, error) {
	tb.Helper()
	v := &procCapgate{Name: name, bin: bin, caps: map[string]string{}}
	var err error
	var adminHash, syncHash string
	if v.adminToken, adminHash, err = coordinator.GenerateSecret(); err != nil {
		tb.Fatal(err)
	}
	if v.syncToken, syncHash, err = coordinator.GenerateSecret(); err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	coordAddr, gwAddr := freePort(tb), freePort(tb)
	v.CoordinatorURL, v.GatewayURL = "http://"+coordAddr, "http://"+gwAddr
	seeds := d.addrs
	// Only settings every capgate version knows: the baseline binary
	// refuses unknown keys.
	coord := map[string]any{
		"listen": coordAddr, "data_dir": filepath.Join(dir, "data"),
		"admin_token_hashes": []string{adminHash}, "sync_token_hashes": []string{syncHash},
		"broker": map[string]any{"seeds": seeds},
	}
	gw := map[string]any{
		"id": name + "-gateway", "listen": gwAddr, "coordinator_url": v.CoordinatorURL,
		"broker": map[string]any{"seeds": seeds},
	}
	if name == "nomerge" {
		gw["broker"] = map[string]any{"seeds": seeds, "merge_fetches_after": 0}
	}
	if name == "noahead" {
		gw["broker"] = map[string]any{"seeds": seeds, "read_ahead_bytes": 0}
	}
	if (name == "capgate" || name == "onelane") && d.size.ListenParts > 0 {
		// The listener binds kafka_fetch_lanes ports from this one on.
		addrs, err := stack.FreePortRanges("", 1, gateway.DefaultConfig().KafkaFetchLanes)
		if err != nil {
			tb.Fatal(err)
		}
		v.KafkaAddr = addrs[0]
		gw["kafka_listen"] = v.KafkaAddr
		if name == "onelane" {
			gw["kafka_fetch_lanes"] = 1
		}
	}
	var env []string
	if name == "oneproc" {
		env = append(env, "GOMAXPROCS=1")
	}
	if name == "capgate" || name == "nomerge" || name == "noahead" || name == "oneproc" {
		v.pprofAddr = freePort(tb)
		gw["pprof_listen"] = v.pprofAddr
	} else {
		// A baseline built with the profiling patch of BENCHMARKS.md
		// serves pprof here; without it nothing listens.
		v.pprofAddr = freePort(tb)
		env = append(env, "BENCH_PPROF_LISTEN="+v.pprofAddr)
	}
	if v.coordinator, err = startServe(tb, stack.Launch{Name: name + "-coordinator", Bin: bin, Dir: dir, Section: "coordinator", Settings: coord},
		v.CoordinatorURL+"/healthz"); err != nil {
		return nil, err
	}
	if v.gateway, err = startServe(tb, stack.Launch{Name: name + "-gateway", Bin: bin, Dir: dir, Section: "gateway", Settings: gw,
		Env: append(env, "CAPGATE_GATEWAY_SYNC_TOKEN="+v.syncToken)}, v.GatewayURL+"/readyz"); err != nil {
		stopProcess(v.coordinator)
		return nil, err
	}
	v.hc = newHostClient(v.GatewayURL)
	return v, nil
}

// startServe starts a capgate process (warn-level logs), stopped at the
// end of tb, and waits until url answers 200; one that does not is
// stopped, its error returned (with its last lines).
func startServe(tb testing.TB, l stack.Launch, url string) (*stack.Process, error) {
	tb.Helper()
	l.LogLevel = "warn"
	p, err := l.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopProcess(p) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitHTTP(ctx, &http.Client{Timeout: 2 * time.Second}, url); err != nil {
		stopProcess(p)
		return nil, err
	}
	return p, nil
}

// freePort picks a free loopback address for a process to listen on.
func freePort(tb testing.TB) string {
	tb.Helper()
	addr, err := stack.FreeAddr("")
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// grant mints a shared fetch capability for topic/partition.
func (v *procCapgate) grant(tb testing.TB, topic string, partition int32, holder string) {
	tb.Helper()
	var resp api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: topic, Partition: partition, Ops: []string{"fetch"},
		TTLMs: (10 * time.Minute).Milliseconds(), Holder: holder}
	hc := &http.Client{Timeout: 10 * time.Second}
	if _, err := doJSON(context.Background(), hc, http.MethodPost, v.CoordinatorURL+"/v1/admin/capabilities", v.adminToken, req, &resp); err != nil {
		tb.Fatalf("%s: grant %s/%d: %v", v.Name, topic, partition, err)
	}
	v.caps[topic+"/"+strconv.Itoa(int(partition))] = resp.Capability
}

// credential mints a client credential for group through the admin API.
func (v *procCapgate) credential(tb testing.TB, group string) string {
	tb.Helper()
	var resp struct {
		coordinator.ClientResponse
		// The field's name before it became client_credential: the
		// baseline binary of before #17 still answers it.
		Old string `json:"credential"`
	}
	req := coordinator.ClientRequest{Name: "bench-" + group, Groups: []string{group}, Topics: []string{"*"}, TTLMs: time.Hour.Milliseconds()}
	hc := &http.Client{Timeout: 10 * time.Second}
	if _, err := doJSON(context.Background(), hc, http.MethodPost, v.CoordinatorURL+"/v1/admin/clients", v.adminToken, req, &resp); err != nil {
		tb.Fatalf("%s: client credential: %v", v.Name, err)
	}
	if resp.Credential == "" {
		resp.Credential = resp.Old
	}
	if resp.Credential == "" {
		tb.Fatalf("%s: client credential: empty answer", v.Name)
	}
	return resp.Credential
}

// cpu is the gateway process's CPU time so far.
func (v *procCapgate) cpu() (time.Duration, error) {
	return processCPU(v.gateway.Pid())
}

// processTimes is pid's user and system CPU time so far, from
// /proc/<pid>/stat (the kernel splits the precise total by 10 ms tick
// samples: read it apart over thousands of requests, never one).
func processTimes(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command's closing parenthesis: state is the
	// first (field 3), utime and stime the 12th and 13th (fields 14, 15).
	_, rest, ok := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	tick := time.Second / 100 // USER_HZ, 100 on Linux
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	s, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(u) * tick, time.Duration(s) * tick, nil
}

// processCPU is the CPU time of pid's threads so far, in nanoseconds:
// the sum of the first field of /proc/<pid>/task/*/schedstat. (utime and
// stime of /proc/<pid>/stat count 10 ms ticks, too coarse for a few
// thousand fetches; the Go runtime does not end its threads, so none is
// missing from the sum.)
func processCPU(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
		if err != nil {
			continue // the thread just ended
		}
		first, _, _ := strings.Cut(string(b), " ")
		ns, err := strconv.ParseInt(first, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, task.Name(), err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// profile fetches a pprof profile of the gateway process while load
// runs: kind "profile" (CPU, for d) or "allocs" (allocations during d),
// written to dir/<variant>-<name>.pprof. It returns at once; wait
// blocks until the file is written (errors are logged: a baseline built
// without the profiling patch has none).
func (v *procCapgate) profile(tb testing.TB, dir, kind, name string, d time.Duration) (wait func()) {
	if dir == "" || v.pprofAddr == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", v.pprofAddr, kind, int(d.Seconds()))
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+v.syncToken)
		resp, err := (&http.Client{Timeout: d + 30*time.Second}).Do(req)
		if err != nil {
			tb.Logf("%s: profile %s: %v", v.Name, kind, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			tb.Logf("%s: profile %s: status %d", v.Name, kind, resp.StatusCode)
			return
		}
		path := filepath.Join(dir, v.Name+"-"+name+".pprof")
		f, err := os.Create(path)
		if err != nil {
			tb.Logf("profile: %v", err)
			return
		}
		defer f.Close()
		if _, err := bufio.NewReader(resp.Body).WriteTo(f); err != nil {
			tb.Logf("profile %s: %v", path, err)
		}
	}()
	return func() { <-done }
}
