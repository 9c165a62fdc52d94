// Package gateway is capgate's gateway process: an HTTP (fasthttp) front of
// the Kafka fleet that serves fetch and produce for bearers of capability
// tokens, checking every request against the revocation view it keeps in
// sync with the coordinator (DESIGN §3–§6).
//
// Use:
//
//	g, err := gateway.New(cfg, log) // cfg from DefaultConfig, validated
//	if err != nil { ... }
//	err = g.Run(ctx)                // or g.Start(); ...; g.Close()
//
// One file per resource, each opening with a "Behavior:" comment:
// records_fetch.go (GET records), records_produce.go (POST records),
// health.go (/healthz, /readyz), metrics.go (/metrics). sync.go is the
// sync client, inflight.go the registry of fetches a revocation must
// cancel, auth.go the bearer check, ratelimit.go the per-capability byte
// rate, recordjson.go the hand-rolled JSON encoder of fetched records.
//
// The safety rules the code keeps:
//   - A request is authorized by ocap (signature, cached) and authz.Decide
//     (fences, deny-list, revoked members, topic, partition, op, offsets),
//     and Decide runs again after the broker answers and before any record
//     byte is written, so a fence applied meanwhile wins.
//   - The sync client applies an update, cancels the in-flight fetches it
//     supersedes and waits for them to finish, and only then acknowledges
//     the update by polling with after=seq.
//   - Without a successful sync for sync_timeout (counted from when the
//     last good poll was sent) every fetch and produce is refused with 503.
//
// Concurrency: a Gateway is safe for concurrent use; Start and Close may be
// called once each.
package gateway
