// Package driver is the coordinator's shell logic without the IO: it runs
// a group.Machine the way the coordinator process does, and holds the
// decisions its HTTP handlers make around the machine. The coordinator
// process (package coordinator) wraps it in one goroutine, a timer,
// sockets and badger; the deterministic simulation (e2e/sim) wraps the
// very same code in its seeded world. Nothing here reads the clock, opens
// a socket or touches a disk: time is an argument, the store and the
// token signer are injected (small interfaces with in-memory twins in
// package store and in the simulation).
//
// # The loop (Driver)
//
//  1. Submit gathers an event (the Driver assigns its Ref) and remembers
//     who waits for its answer.
//  2. Flush steps everything gathered in one StepMany, takes the Ready
//     (a failed safety audit refuses it: group.ErrUnsafe), writes its
//     records in ONE Store.Update, and only then hands each message to
//     the request it answers, then Advance. Tick fires the machine's
//     timers the same way.
//  3. Any error — the audit, the store (a full disk, a regression, a
//     Kafka-log writer fenced by a newer leader) — fails the Driver
//     closed: nothing of that Ready is persisted past the store's own
//     atomicity or sent, every waiting request is answered Unavailable,
//     and every later one too. Failure says why.
//
// # The handlers' decisions
//
// CommitOffsets checks the capabilities of a commit (or leave) before the
// machine sees it; RenderGrants turns the machine's grants into signed
// capabilities with resolved start offsets; SyncResponse renders a sync
// answer. The persist mapping (persist.go) and its inverse (restore.go)
// lay the machine's records onto the store's keys.
//
// A Driver is not safe for concurrent use: one goroutine owns it.
package driver
