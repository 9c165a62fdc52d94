// Package faults holds capgate's fault tests: real parts (kfake, the
// coordinator, gateways, SDK consumers over loopback HTTP, some as
// processes) under injected faults — consumers killed (-9) or paused
// (SIGSTOP) past their session, gateways killed, restarted or cut off from
// the coordinator, the coordinator killed (-9) at each step of a handoff,
// broker fetch errors, and membership churn. Every test ends by running
// the harness's checkers (e2e/harness) over the event log it collected.
//
// The package has no code outside its tests; TestMain builds the capgate
// binary and the harness consumer once.
package faults
