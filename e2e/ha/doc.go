// Package ha is the end-to-end suite of coordinator replicas (issue #11,
// DESIGN §9) with real processes: three `capgate coordinator` replicas
// keeping their state in the Kafka log (state: kafka) of a 3-broker
// kfake, two `capgate gateway` processes syncing with the replicas'
// URL list, SDK consumers (the harness's members) under a steady stream.
// The tests kill -9 the leading replica, pause it (SIGSTOP) past the
// takeover and resume it, and cut it off from Kafka while its clients
// still reach it (stack.KafkaCut); every checker of e2e/harness must hold
// over the whole run and no gateway may answer 503 (DESIGN §9: a single
// replica's death never stops a fetch). More faults (chaos5):
//   - the leader killed at each step of a handoff (handoff_test.go), and
//     with an admin revoke, lease or offset reset in flight — persisted,
//     fenced at every gateway, not completed (admin_kill_test.go);
//   - the leader paused while members with the SDK's default
//     request_timeout read on: they keep their sessions
//     (TestLeaderPausedMembersKeepSessions), as does a kgo consumer
//     reading through a gateway's Kafka listener (KIP-848 and classic:
//     TestLeaderPausedKafkaMembersKeepSessions), and a release held by it
//     lands at the standby (TestLeaderPausedReleaseLands); a paused
//     leader handed a sync poll and an admin lease while it sleeps
//     answers neither with what it cannot persist, and gateways keep
//     refusing what the new leader fenced (zombie_test.go);
//   - one gateway cut off from every replica (its proxies swallow every
//     byte) while a handoff runs and the leader is killed in it; one
//     killed holding fences it applied but had not acknowledged, the
//     leader killed too, the gateway restarted (gatewaycut_test.go);
//   - the leader killed -9 or paused as the first of ~400 moves of a
//     large handoff is revoked (largehandoff_test.go), and while each
//     gateway of a rolling restart shuts down and a member joins
//     (rollinggateways_test.go), and as a topic matching the members'
//     pattern subscription is created and its first partition granted
//     (rematch_test.go) — these three count fetches answered 503 rather
//     than refuse them (log503): run with the whole package on a loaded
//     2-core machine, a takeover outlasted the gateways' sync_timeout
//     and they refused out_of_sync, rightly;
//   - the Kafka leaders of the state log, its snapshots and the data
//     topic moved, the transaction coordinators moved, and the broker
//     leading the state log removed, during handoffs (kafka_test.go).
//
// BenchmarkFailover (failover_bench_test.go) measures the takeover and
// what clients see, side by side with today's single coordinator in the
// same run (BENCHMARKS.md §9); BenchmarkFailoverGap (gap_bench_test.go)
// the members' longest time without a fetch answered 200 across a kill
// or a pause of the leader, at seeded moments.
//
//	go test ./e2e/ha/ -v
//	go test ./e2e/ha/ -run '^$' -bench 'Failover$' -benchtime 1x
//	CAPGATE_FAILOVER_SEED=7 go test ./e2e/ha/ -run '^$' -bench FailoverGap -benchtime 1x
package ha
