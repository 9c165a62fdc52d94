// Package driver is the consumer SDK's shell logic without the IO: the
// pure consumer core (client/session) plus every decision its shell makes
// about requests — when to join and rejoin, one long-poll heartbeat at a
// time and its wait (saying resync after one whose answer was lost),
// which gateway a fetch goes to and when it fails
// over, what is retried and for how long, backoffs, and what a cancelled
// fetch's late answer is worth. It is driven like the core: Step an event
// (a request's answer, the user's Poll or Commit, a hook's return, a
// Tick at NextDeadline) and carry out the commands it returns, in order.
//
// Package client runs it with an HTTP transport, one goroutine per
// request in flight and a timer; the deterministic simulation (e2e/sim)
// runs the very same code over its seeded network. A shell with another
// fetch transport (the gateway's Kafka listener running server-side
// sessions) carries out Send{Kind: Fetch} its own way: the driver only
// names the gateway index and the session's fetch.
//
// Commands:
//
//   - Send: one attempt of a request (join, heartbeat, fetch, commit,
//     leave), bounded by Timeout; step Answered{Call} with its outcome.
//   - Cancel: abort attempt Call if it is still running (its answer, if
//     any, is then ignored).
//   - Deliver, CallRevoke, CallGrant, CommitResult: the session's, for the
//     user (see client/session).
//   - JoinRetrying: the first join failed retriably, retried until
//     join_timeout (once, at its first failure).
//   - JoinResult: the first join ended (Err nil: joined).
//   - LeaveResult: the leave ended; the consumer stops next.
//   - Failed: the consumer cannot go on (a rejoin was refused for good).
//   - Stop: the session is over; cancel what still runs.
//
// Not safe for concurrent use: the shell serialises Step and Tick.
package driver
