// Package authz is the gateway's pure authorization core: the revocation
// view a gateway keeps from the coordinator's sync channel, and Decide,
// which says whether one verified capability may serve one request.
//
// The view holds epoch fences per (group, topic, partition) that only move
// forward, denied capability ids, revoked members, live QoS overrides and
// the coordinator's verification keys (DESIGN §3, §4, §5). The gateway shell
// feeds it sync updates and asks it questions; it does no IO and reads no
// clock: time is always an argument.
//
// Use:
//
//	v := authz.NewView(authz.Config{Leeway: 2 * time.Second})
//	changes, err := v.Apply(update, now) // from GET /v1/sync; Reset replaces the view
//	// hand v.Keys() to the ocap.Verifier when changes.KeysChanged,
//	// cancel in-flight fetches that changes.Raised / changes.Revoked supersede,
//	// then acknowledge update.Seq.
//
//	// per request, after ocap.Cache / ocap.Verifier:
//	if r := authz.Decide(claims, authz.Request{Topic: t, Partition: p, Op: ocap.OpFetch, Offset: o}, v, now); r != authz.Allow {
//		// answer r.Status() with r.Code()
//	}
//
// A capability whose epoch is above the view's fence is proof that older
// epochs are dead (the coordinator fences e before it mints e+1), so the
// shell calls Raise when it first verifies one.
//
// Concurrency: View is safe for concurrent use; Decide and QoS take a read
// lock and never allocate, so they run in parallel with each other and
// with Apply, Raise and Prune.
package authz
