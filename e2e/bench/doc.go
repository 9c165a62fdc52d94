// Package bench measures capgate side by side with what it replaces, every
// part real and in one process on loopback: Kafka's own rebalance protocols
// (franz-go group consumers: eager range, cooperative sticky, KIP-848) and
// direct fetches from the broker (broker.Client, franz-go), against a kfake
// broker, the coordinator and real gateways. BENCHMARKS.md at the
// repository root has the commands, the figures and what they mean.
//
// # Running it
//
//	go test ./e2e/bench/                                  # smoke tests, tiny sizes (CI)
//	go test -run '^$' -bench . -benchtime 1x -timeout 20m ./e2e/bench/   # the whole set, ~5 min
//	go test -run '^$' -bench . -benchtime 1x -short ./e2e/bench/         # a small variant, ~1 min
//
// Each benchmark iteration is one scenario run; -benchtime 2x runs each
// twice. Figures go to b.ReportMetric (ns/op is suppressed) and, with the
// ratios against the baseline measured in the same run, to tables on
// stdout. CAPGATE_BENCH_DETAIL=1 adds a partition-by-partition table per
// rebalance run, CAPGATE_BENCH_PROFILE_DIR=dir writes CPU profiles of the
// scale join phase and of the bulk fence, CAPGATE_E2E_LOG=debug shows
// every part's logs.
//
// Every deployment is built by internal/stack (stack.go wraps it: the
// same builder as `capgate dev` and the end-to-end suites), capgate
// members run its consumer loop, and pauses are internal/timeline's (the
// one definition README.md and BENCHMARKS.md use).
//
// # Scenarios
//
//   - Rebalance (rebalance.go, members.go, tracker.go): one kfake cluster
//     per run, 12 partitions, a producer writing one record per partition
//     every 10 ms; three members settle, the baseline runs, a fourth joins.
//     timeline.Analyze turns what the members received into pauses per
//     partition (moved and unmoved), duplicates, lost records and time to
//     stable.
//   - Deployed (deploy.go, deploy_measure.go, deploy_test.go,
//     cmd/benchkafka): capgate as it runs in production — coordinator and
//     gateway processes from the built binary (and, with
//     CAPGATE_BENCH_BASELINE_BIN and CAPGATE_BENCH_EXTRA_BINS, earlier
//     binaries beside them), a 3-broker Kafka process, this process only
//     generating load — next to franz-go: 1-record fetch latency and the
//     gateway's CPU per fetch (/proc schedstat), req/s at 16 workers over
//     latency (3 partitions) and over spread (12 partitions, several per
//     broker: where concurrent fetches merge into one Kafka Fetch), one
//     SDK consumer's records/s (readers in a rotating order), a holder's
//     fetches while another abandons 500 long polls; pprof of the gateways
//     with CAPGATE_BENCH_PROFILE_DIR. BenchmarkDeployScan repeats only the
//     consumer scan (-benchtime 20x: 20 rounds) for medians of its ratios;
//     BenchmarkDeployLoad only the two 16-worker phases, with each
//     gateway's merged-fetch counts (CAPGATE_BENCH_NOMERGE adds this
//     tree's binary with merging off).
//   - Gateway overhead, in-process (overhead.go, throughput.go): open-loop
//     1-record fetches at fixed rates, sequential 1-record fetches, and
//     records/s to one consumer (SDK raw batches and JSON, franz-go
//     consumer).
//   - Revocation (revoke.go): admin partition revokes, which answer once
//     every gateway acknowledged the fence, with 1, 4 and 16 gateways; a
//     bulk fence of a member holding 10,000 partitions, with where its
//     time went (revoke_stages.go: the answer and its persist, the first
//     and last gateway to apply the fences — their "sync applied" lines —,
//     the last ack as the coordinator stamped it, the persist after).
//   - Coordinator scale (scale.go, rawmember.go): 1,000 members over plain
//     HTTP join a group of 10,000 partitions and release what is revoked.
//
// The analysis (internal/timeline) is pure and tested on made-up
// timelines; the scenarios wait on real sockets by polling with deadlines.
//
// Concurrency: the scenario functions run one at a time; tracker,
// rawMember and scaleWatch are safe for concurrent use.
package bench
