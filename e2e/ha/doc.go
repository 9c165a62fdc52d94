// Package ha is the end-to-end suite of coordinator replicas (issue #11,
// DESIGN §9) with real processes: three `capgate coordinator` replicas
// keeping their state in the Kafka log (state: kafka) of a 3-broker
// kfake, two `capgate gateway` processes syncing with the replicas'
// URL list, SDK consumers (the harness's members) under a steady stream.
// The tests kill -9 the leading replica, pause it (SIGSTOP) past the
// takeover and resume it, and cut it off from Kafka while its clients
// still reach it (stack.KafkaCut); every checker of e2e/harness must hold
// over the whole run and no gateway may answer 503 (DESIGN §9: a single
// replica's death never stops a fetch).
//
// BenchmarkFailover (failover_bench_test.go) measures the takeover and
// what clients see, side by side with today's single coordinator in the
// same run (BENCHMARKS.md §9).
//
//	go test ./e2e/ha/ -v
//	go test ./e2e/ha/ -run '^$' -bench Failover -benchtime 1x
package ha
