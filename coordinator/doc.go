// Package coordinator is capgate's coordinator process: the consumer,
// gateway-sync and admin HTTP APIs of DESIGN §5 on fasthttp, one event loop
// owning the pure group.Machine, durable state in the badger store, the
// signing key ring, topic metadata from Kafka and an optional mirror of
// committed offsets into Kafka.
//
// # Using it
//
//	c, err := coordinator.New(cfg, log)       // opens the store, restores the machine
//	go func() { errc <- c.Run(ctx) }()        // serves until ctx is done or Close
//	...
//	c.Close()                                 // graceful: held polls answered, store closed
//
// Tests pass WithListener (127.0.0.1:0), WithBroker (a kfake-backed client)
// and WithRand (seeded member ids). GenerateSecret makes admin and sync
// tokens and the SHA-256 digests the configuration holds.
//
// # The event loop (loop.go)
//
// One goroutine owns the machine and follows its contract: it takes
// requests from a bounded queue (event_queue), steps up to event_batch_max
// of them, persists Ready.Persist in ONE synchronous store.Update, only
// then hands Ready.Messages to the HTTP handlers waiting on their Refs,
// then calls Advance; one timer follows NextDeadline. Handlers do the slow
// work after that, off the loop: they resolve start-offset sentinels
// against Kafka (cached per partition for offset_cache_ttl) and mint the
// capabilities. A store refusal (epoch, offset or sequence regression) is
// a bug: the loop logs it, sends nothing of that Ready, answers every held
// request with 503 and stops; Run returns the error (fail closed).
//
// Held long polls (heartbeats, sync polls, admin revokes waiting for the
// gateways) are answered from later Readys; a reply whose client went away
// is dropped, which the machine tolerates. On shutdown every held request
// is answered 503 unavailable (Retry-After: 1).
//
// Restart: the store's snapshot becomes the machine's restore snapshot
// (restore.go); fields the store layout has no place for travel as meta
// values (persist.go lists them). Members get their session timeout to
// come back; every gateway resynchronises from a reset snapshot.
//
// # Concurrency
//
// Coordinator methods are safe for concurrent use. Run may be called once.
package coordinator
