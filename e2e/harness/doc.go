// Package harness runs capgate's real parts on loopback under faults, logs
// what every part did on one timeline, and checks the safety invariants
// of DESIGN §4 over that log. It is the fault tests' toolkit
// (e2e/faults) and any end-to-end suite may import it.
//
// # A cluster
//
//	bin, _ := harness.Build(dir)  // capgate + the consumer program, once (TestMain)
//	c := harness.Start(t, harness.Options{Groups: []string{"g"}, Binaries: bin})
//	prod := c.StartProducer(t, 20*time.Millisecond)     // "p<partition>-<seq>" straight to Kafka
//	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: "g"})           // SDK consumer in this process
//	b := c.StartConsumerProcess(t, harness.MemberOptions{Name: "b", Group: "g"})  // ... or as a process
//	b.Kill()                      // kill -9; also Pause/Resume (SIGSTOP/SIGCONT), Terminate
//	c.Gateways()[0].Proxy.Blackhole()  // cut a gateway off the coordinator; Heal
//	prod.Stop()
//	c.WaitDelivered(t, "g", 30*time.Second)
//	c.Check(t)                    // the seven checkers over the log
//
// Start builds the deployment with internal/stack (the one builder of
// `capgate dev`, e2e/sdk and e2e/bench too): an embedded Kafka (kfake;
// its Cluster() injects Kafka faults), a coordinator (in this process, or
// a `capgate coordinator` process with Options.CoordinatorProcess, which
// Kill sends SIGKILL and Restart brings back on the same address and data
// directory), then a SyncTap in front of the coordinator's sync channel,
// and gateways (in this process, or `capgate gateway` processes), each
// reaching the tap through its own TCP Proxy. The parts keep their
// addresses across restarts. Timing (stack.Timing) holds the short clock
// settings (DefaultTiming: session 1.5s, gateway_timeout 3s, sync_timeout
// 2s) and checks the rules that tie them together. Members run the
// stack's consumer loop and the producer is the stack's.
//
// # The event log
//
// Every source writes to one Log, stamped on the machine's monotonic clock
// (Time; CLOCK_MONOTONIC on Linux, shared by all processes):
//   - gateways' per-request trace lines (Fetch: holder, epoch, outcome,
//     Start..End), turned on per group with a QoS override (Cluster.Trace)
//     and captured with TraceCore (in-process) or ParseTraceLine (JSON
//     logs of a process);
//   - consumers' own lines (Line: grants, renewals, revokes, coordinator
//     calls, commits, fetches, delivered records), from a Recorder
//     round-tripper inside RunConsumer, printed as JSON by the consumer
//     program (cmd/consumer) so a killed process loses nothing it printed;
//   - the SyncTap: every sync answer (seq, fences) and poll (after = ack)
//     per gateway, and each gateway's leave (POST /v1/sync/leave, sent once
//     it stopped serving) — a passive proxy, not a gateway, so no handoff
//     waits for it; it can hold answers or acks to stop a handoff at a
//     chosen step;
//   - an observer polling the admin API (partition epochs, states, owners,
//     committed offsets; gateways' acked seqs);
//   - the producer's acknowledged records, and the faults the test injected.
//
// # The checkers
//
// CheckExclusiveReader, CheckEpochsRise, CheckNoAdmitAfterAck,
// CheckGrantAfterSafe, CheckNoLostRecords, CheckCommittedOffsets and
// CheckDuplicates each take a Snapshot (plain, sortable data — tests build
// them by hand) and return the Violations; each one's comment states its
// invariant and the bound it allows. CheckAll runs them all,
// RequireInvariants fails a test with them.
//
// Set CAPGATE_E2E_LOG=debug (or info, warn) to see in-process parts' logs.
//
// Everything is safe for concurrent use unless its documentation says
// otherwise; Snapshot is a value.
package harness
