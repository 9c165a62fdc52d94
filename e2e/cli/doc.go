// Package cli holds the end-to-end tests of the capgate command: they
// build the binary once, run `capgate dev` as a real process on free
// loopback ports, and drive it with kcat, curl and the capgate CLI
// (consume, produce, admin), as a newcomer would. The curl walk-through
// in README.md is executed, block by block, by TestWalkthrough.
//
// The tests run one after another (the demo measures pauses and wants the
// machine to itself) and take about 30 s. kcat is needed by
// TestKcatProduceConsume: without it the test skips, unless CI=true.
package cli
