// Package ocap implements capgate's capability tokens: claims, minting,
// strict verification, the Ed25519 key ring with JWKS export and import,
// the verified-token cache, and attenuation (DESIGN §3).
//
// Three kinds of token share one format and are told apart by the JOSE
// header typ, so one kind can never be presented as another:
//
//	capgate+jwt         a capability: one partition, ops, lease, epoch fence
//	capgate-client+jwt  a client credential: may join the listed groups
//	capgate-member+jwt  a member token: one member of one group
//
// Use: the coordinator owns a KeyRing and a Minter; gateways hold a
// Verifier fed with the coordinator's public keys (SetKeys, from JWKS on
// the sync channel) and a Cache in front of it:
//
//	c, ok := cache.Get(token, now)        // hot path: no signature, no allocation
//	if !ok {
//		c, err = verifier.Verify(token, ocap.KindCapability, now)
//		if err == nil { cache.Put(token, c) }
//	}
//	// then check topic, partition, op, offsets, fence, deny-list: see gateway/authz
//
// Every failure is one sentinel error (ErrExpired, ErrBadSignature, ...)
// testable with errors.Is. Failures are never cached.
//
// Concurrency: Verifier, Cache and Minter are safe for concurrent use;
// KeyRing is not (the coordinator mutates it from its event loop and hands
// copies out). Claims are immutable once verified.
package ocap
