// Package revocation is capgate's one revocation view: denied token ids
// (a capability, a member token or a client credential, each also denying
// everything chained from it), revoked members and epoch fences, with one
// expiry rule for all of them.
//
// The rule: an entry whose time is T (a denied token's exp, a revoked
// member's until, unix seconds) holds while now < T + leeway +
// max_clock_skew. A token with exp ≤ T passes a verifier with that leeway
// only while its clock reads < T + leeway, and no clock is behind the
// coordinator's by more than max_clock_skew; so once an entry lapses
// everywhere, nothing it covers can pass any verifier, and every holder
// of the view — the coordinator's state machine, the coordinator's own
// token checks, each gateway's authz.View and the simulation — answers
// the same for the same (entry, token, now).
//
// PURE: no IO, no clock; time is an argument. A Set is not safe for
// concurrent use: its owner (one goroutine, or a lock) serialises it.
package revocation
