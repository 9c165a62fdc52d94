// Package cli holds the end-to-end tests of the capgate command: they
// build the binary once, run `capgate dev` as a real process on free
// loopback ports, and drive it with kcat, curl and the capgate CLI
// (consume, produce, admin), as a newcomer would. The curl walk-through
// in README.md is executed, block by block, by TestWalkthrough.
//
// The demo, the walk-through and the restart test run one after another
// (the demo measures pauses and wants the machine to itself); the consume,
// revoke and token tests, each with a `capgate dev` of its own, then run
// in parallel with each other (go test starts parallel tests once the
// sequential ones are done). The package takes about 40 s. kcat is needed by
// TestKcatProduceConsume: without it the test skips, unless CI=true.
package cli
