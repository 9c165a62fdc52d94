// Package guard is the gateway's shell logic around its revocation view,
// without the IO: the sync client's decisions (Follower: what to poll,
// whether an answer may be applied, when it is acknowledged, when the
// gateway must refuse everything, how long to back off) and the in-flight
// registry's (Registry: which fetches a sync update, or a newer
// capability, cancels). The gateway process (package gateway) runs them
// around an HTTP client, goroutines, contexts and a mutex; the
// deterministic simulation (e2e/sim) runs the very same code in its
// seeded world. Nothing here reads the clock or does IO.
//
// The order the shells keep, for one sync answer to a poll sent at sent:
//
//  1. Follower.Apply: check the answer (a delta below what was
//     acknowledged asks for a snapshot) and apply it to the view.
//  2. Registry.Refused: the fetches the new view refuses; cancel them and
//     WAIT until each has finished.
//  3. Follower.Acked(sent, seq): only now does the next poll, with
//     after=seq, acknowledge the update; the gateway is in sync as of sent.
//
// A Follower is owned by the sync loop, except Refusal, which any
// goroutine may call. A Registry is not safe for concurrent use: the
// gateway guards it with a mutex.
package guard
