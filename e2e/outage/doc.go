// Package outage measures and tests what happens to consumers when
// gateways go away and come back, and when no coordinator answers at all
// (issue #11 items 5 and 6), on a stack of real parts (internal/stack):
// kfake, the coordinator, gateways as `capgate gateway` processes in the
// benchmarks, SDK consumers under a steady stream.
//
//   - TestHandoffRightAfterGatewayLeaves: a handoff right after a gateway
//     shut down cleanly completes in round trips, not gateway_timeout.
//   - TestClientsFollowTheLeader: three coordinator replicas; consumers
//     listing a standby first follow its 421 not_leader to the leader
//     (once, then cached), a gateway leaves through the replicas, and a
//     leader kill loses nothing.
//   - BenchmarkRollingRestart: 2 gateway processes under load, each
//     stopped (SIGTERM, it leaves) and started again in turn while
//     partitions move; beside it in the same run the same with SIGKILL
//     (no leave: handoffs wait gateway_timeout). Pauses per the one
//     definition, timeline.Pause, beyond the steady state.
//   - BenchmarkCoordinatorOutage: a 30 s outage of the only coordinator,
//     silent_gateways fence vs serve: the data outage of each partition.
//   - BenchmarkHandoffGatewayCutOff: one gateway cut off from the
//     coordinator (a blackholed TCP proxy on its sync path), an admin
//     revoke: how long it waits, fence vs serve.
//
// The world (world_test.go) is one stack, one group of SDK consumers on
// topic orders (12 partitions), a producer writing one record per
// partition every 20 ms, and a timeline.Recorder of everything delivered.
package outage
