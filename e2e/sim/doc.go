// Package sim is capgate's deterministic simulation: one single-threaded
// world, driven by a seeded PCG, in which the code the binaries run —
// the coordinator's state machine (coordinator/group) and its shell
// decisions (coordinator/driver: the event loop, commit admission, grant
// rendering, the persist mapping) over the Kafka-log store on its
// in-memory twin (store.MemLog), the gateway's revocation view
// (gateway/authz) and shell decisions (gateway/guard: the sync client and
// the in-flight registry), and the SDK's core (client/session) and shell
// decisions (client/driver) — run over a simulated network and Kafka,
// under faults, while ten checkers watch every event. What stays in
// the simulation is what a process does with sockets, goroutines and
// timers (carrying out the decisions' commands), stand-in tokens instead
// of signatures, and the models of Kafka, the network and the users.
//
// # Running it
//
//	go test ./e2e/sim/                                  # the CI sweeps: 2,000 seeds of one coordinator (10 simulated minutes each) and 2,000 of three replicas (5 each)
//	go test ./e2e/sim/ -run 'TestSim$' -v -sim.seed=123 -sim.trace   # replay one seed, printing every event
//	go test ./e2e/sim/ -run 'TestSim$' -sim.seeds=20000 -timeout 1h  # 20,000 more seeds (from -sim.first, default 1,000,000)
//	CAPGATE_SIM_SEEDS=20000 go test ./e2e/sim/ -run 'TestSim$' -timeout 1h  # the same through the environment
//
// A failing seed prints its checker, the event index and virtual time,
// and the command that replays it. Runs are reproducible: a seed always
// produces the same trace (TestTraceDeterministic checks the hash).
//
// # The world
//
// Time is virtual: an event queue ordered by time, ties broken by the
// order events were scheduled; nothing reads the wall clock and every map
// is iterated sorted. Each seed draws its own cluster (1–3 gateways, 2–6
// consumer slots, 8–24 partitions over one or two topics) and its own
// fault rates, from calm to harsh:
//
//   - network (net.go): every message between parts — join, heartbeat,
//     commit, leave, sync poll, fetch, and their answers — is dropped,
//     delayed (so reordered) or, for requests a real transport or client
//     retry can repeat (GETs, commits, leaves, a join under its
//     Idempotency-Key), duplicated; nodes are cut off, or single links
//     cut, for up to 30 s. A sender waits for an answer until its
//     request's deadline, as the real clients do. In three seeds in four
//     a join, commit or leave is now and then stalled past that deadline
//     (drawStalls: a slow leader's write, a proxy's queue): its sender
//     gives up and retries the same key or offsets (with replicas at the
//     next replica, as the SDK's join margin does), and the stalled one
//     lands later — after the retry was answered, or while it is in
//     flight. A repeated join must be answered the member the first made
//     (checker 10), a repeated commit that landed is answered done; the
//     sweep counts both (Stats.KeyedRepeats, LateRepeats, LandedRepeats)
//     and TestSim fails if either never ran.
//   - coordinator (coordinator.go): coordinator/driver gathers the
//     requests of a batch window into one StepMany and persists each
//     Ready through the real persist mapping to a store.LogStore on a
//     store.MemLog BEFORE any of its messages is sent; the handlers'
//     decisions (driver.CommitOffsets, driver.RenderGrants) run on every
//     request. It crashes before a persist (the store fails: the Ready is
//     lost), between persist and send (its messages are lost), or at
//     random, and restarts by opening the log again (fence, read to the
//     end) and restoring the machine from it (driver.Load, group.Restore).
//     In half the seeds its driver writes partitions a Ready leaves
//     unowned as unowned blocks from 1–3 of a topic on (drawUnownedRunMin;
//     the coordinator's 64 is beyond the sim's topics), so those seeds
//     crash and restore around that path.
//   - gateways (gateway.go): gateway/guard's Follower (poll after=…, Apply,
//     cancel what Registry.Refused picks, Acked; backoff; self-fence once
//     sync_timeout passed since the last good poll was sent) around a
//     real authz.View, and the fetch path in the order of
//     gateway/call.go and records_fetch.go (sync state, verify, raise the
//     fence on a newer capability and cancel Registry.Below, Decide,
//     broker long poll, decide again). Clocks are offset within
//     max_clock_skew; restarts lose the view. In half the seeds gateways
//     get stuck for up to twice gateway_timeout: every sync answer fails
//     to apply, so they poll on with the same after, acknowledge nothing
//     and self-fence (a gateway that cannot apply updates: the
//     coordinator's lag rule must not count it safe before it refuses).
//   - consumers (consumer.go): client/driver (first join bounded by
//     request_timeout, rejoins, one long-poll heartbeat, fetch failover
//     between gateways and backoff, commit and leave retries within
//     request_timeout) around the real session.Session, its Send commands
//     carried over the network, and a user who polls and commits. They
//     join, leave, crash (kill -9, often restarting with their instance
//     id), give up (a first join that failed) and freeze past their
//     session timeout. In half the seeds member tokens expire 8 s to
//     2 min after their join (drawMemberTokens): members renew in place
//     (the driver's carry-over, a join with renew_token, checked by the
//     shell's rules: coordinator/join.go checkRenewToken, with
//     groups.renew_token_grace: a renewal whose member token expired
//     less than the grace beyond the leeway ago — it met a coordinator
//     that was down — is taken, checked against the revocations as at
//     the grace's start, the revocations retaining their entries that
//     much longer, as the machine does) or, when that fails, leave and
//     join anew; a member frozen or cut off past its token's exp is
//     refused token_expired and joins again. TestRenewalsMoveNothing: in
//     a calm world renewals fence nothing; TestRenewalsInGraceKeepTheirMembers:
//     renewals meeting coordinator crashes land in the grace and every
//     checker holds.
//   - kafka (kafka.go): append-only logs, a producer writing uniquely
//     numbered records, long-polling fetches; in half the seeds a topic
//     gains partitions mid-run (the coordinator reads the new count);
//     in half the seeds of two topics the second is created mid-run
//     (drawCreate) — every consumer subscribes to it from its join on,
//     by name or by pattern — so a metadata read finds a new topic and
//     the shell matches the live patterns against it before the loop
//     takes the change (group.LivePatterns.MatchAdded, Topics.Hits, as
//     coordinator/metadata.go does; the loop matches itself what went
//     live since). TestSim fails if no read did (Stats.TopicHits).
//   - operators (faults.go): in half the seeds an admin revokes random
//     partitions or members, and denies the last capability of one. In
//     half the seeds a sync-token holder polls as gateway "rogue" through
//     the faulty phase, never acknowledging (after=0, or a stale after):
//     under silent_gateways fence it must not stall handoffs past
//     gateway_timeout (the lag rule), under serve nor make one complete
//     early. A full gateway table (fill.go, fill_test.go): the holder
//     polls under several ids ("rogue-0" …) that keep limits.gateways
//     full while gateways restart under new ids without leaving, or the
//     table holds exactly the gateways, which get stuck and restart:
//     under fence an id lagging longer than gateway_timeout is forgotten
//     to make room, and every checker must hold (the lag rule's bound
//     after a forget is what keeps checker 4 quiet when the forgotten
//     gateway has just recovered).
//   - coordinator replicas (replica.go, TestSimReplicas, Options.Replicas):
//     three replicas over one store.MemLog, each running the replica
//     shell's decisions, coordinator/leader.Replica (the binary runs the
//     same), with the real store (Follower tail, Promote = fence,
//     barrier, read to the end; Beat, also to renew a lapsed lease;
//     step down at a failed or fenced write; answers confirmed with
//     store.WriteMark where leader.MustConfirm says); leaders killed, paused past their lease
//     and resumed as zombies (what reached them runs before or after
//     their own leadership step), followers deciding before they read
//     (two stand for one silence), transactions aborted or committed with
//     their answer lost; clients choose replicas with
//     internal/coordinators.List and follow not_leader; in half the
//     seeds one replica is unfit (unfit.go): misconfigured (another
//     coordinator id: its follower's check makes it Unfit, it never
//     stands), or broken (its takeovers fail after their barrier, and it
//     stands first after every silence). In half the seeds the lease
//     follows the log's pace (leader.Config.LeaseTimeoutMax, the
//     binaries' replica.lease_timeout_max, drawn between the lease and
//     three of it) and the log is slow: a tenth to a quarter of the
//     beats take a quarter to all of up to 2.5 leases to commit, so
//     leases lapse while a beat is still committing; a leader whose
//     renewal commits past the fixed lease's end keeps leading
//     (Stats.StretchedLeases; TestSimReplicas fails if none), followers
//     wait out the stretched lease, and checker 9's bound is taken
//     from the longest lease.
//
// After the faulty phase the world heals (faults off, crashed parts
// restart, the producer stops) and drains until every record was
// delivered or three simulated minutes pass.
//
// # The checkers (checkers.go)
//
//  1. exclusive reader: no two members have a fetch admitted (and still
//     able to serve data) for one partition at the same time, and once a
//     fetch under epoch e was admitted, no other member's under a lower
//     epoch is;
//  2. epochs only rise: per partition across crashes, and published
//     fences never fall (with replicas: a reset never lowers a fence
//     below what that gateway was answered before — a deposed leader's
//     stale reset to a gateway that never held the newer fence is
//     checker 8's, and counted, StaleResets);
//  3. a gateway that acknowledged fence e+1 admits nothing at epoch ≤ e;
//  4. a new epoch is granted only after every gateway is safe for the
//     fence and the previous holder released, was removed, or timed out;
//     an admin revoke is answered only once every gateway is safe;
//  5. no lost record after the drain;
//  6. committed offsets never move back; a new owner starts at the last
//     committed offset (or offset_reset), and reads from there;
//  7. a clean handoff duplicates nothing; otherwise duplicates are bounded
//     by what the previous holder delivered after its last commit.
//  8. with replicas: a replica deposed (fenced by another's takeover)
//     before a request reached it sends no sync answer and no capability
//     for it.
//  9. with replicas: a fit replica leads within a bound (4 × (the
//     longest lease + the longest stagger) + the slowest beat + 2 s) of
//     the last moment one led, no fit
//     replica ran, or a fault struck a replica; an unfit replica never
//     leads (unfit.go). Its planted bug is the one the sim had: the shell
//     steps positions without their Barriers, so every failed takeover's
//     barrier reads as a live leader.
//  10. one member per join: the attempts of one join (one Idempotency-Key)
//     are answered one member while it lives, however many land — a
//     repeat is its rejoin (fenced; checker 4 counts it as the earlier
//     incarnation's release). Its planted bug: the join handler drops the
//     key, so a repeat makes a second member.
//
// Each runs after every event that changes its inputs. The machine's own
// CheckInvariants runs too (every 8th flush; its audit of every step
// refuses the Ready it breaks at once), and at the end every request must
// have been answered. Tests plant a bug per checker in the real shell
// code (bugs in faults.go, switched on through each package's Bugs) to
// prove each can fire.
//
// # Concurrency
//
// A World is single-threaded; Run may be called from many goroutines at
// once (the CI sweep runs shards in parallel), each with its own world.
package sim
