// Package client is capgate's Go consumer SDK: it joins a group at the
// coordinator, keeps a long-poll heartbeat, fetches every granted
// partition through the gateways with its capability, delivers records
// through Poll, commits, and hands partitions over cleanly when the
// coordinator revokes them (DESIGN §4, §5). A small Producer writes
// through the gateways with a produce capability.
//
// The per-partition logic lives in the pure package client/session, and
// every decision about requests (retries, backoff, failover, rejoin, one
// heartbeat at a time) in client/driver, which the deterministic
// simulation runs too; this package is their IO shell: HTTP, goroutines,
// clock.
//
// # Use
//
// The module needs Go 1.26.8 or later (its go.mod says go 1.26.8).
// README.md's "Use the Go SDK" has this as a whole program, built and run
// by a test; example_test.go has a producer, TLS and credential renewal.
//
//	cfg := client.DefaultConfig()
//	cfg.CoordinatorURL = "http://127.0.0.1:7070" // or the replicas', comma-separated
//	cfg.Gateways = []string{"http://127.0.0.1:8080", "http://127.0.0.1:8081"}
//	cfg.Group, cfg.Topics, cfg.Credential = "billing", []string{"orders"}, credential
//	c, err := client.NewConsumer(cfg, client.WithSlog(slog.Default()), // or WithLogger(zapLogger); none: no logging
//		client.OnRevoke(func(ctx context.Context, ps []client.Partition) { /* finish work on ps */ }))
//	if err != nil {
//		return err
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	if err := c.Join(ctx); err != nil {
//		return err
//	}
//	for {
//		records, err := c.Poll(ctx) // also: the previous batch is processed
//		if err != nil {
//			break // ctx ended (Ctrl-C), or the consumer stopped: Close says why
//		}
//		process(records)
//	}
//	// ctx has ended: Close gets a context of its own.
//	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	return c.Close(closeCtx) // revoke hook, final commit + release, leave
//
// # Joining
//
// Join returns once the coordinator answered the join, or gives up with
// why. A join that fails retriably — no answer within request_timeout, a
// coordinator not running, 421 with no leader known, 503, 429: what a
// consumer meets while a standby replica takes over from a failed leader
// — is retried with backoff until Config.JoinTimeout (30 s); a refusal no
// retry mends (400, 401, 403, 404, 409) returns at once with its
// message. Every attempt carries the first one's Idempotency-Key: an
// attempt a failing leader wrote to its log but never answered made a
// member, and the retry is answered that member rather than making a
// second one.
//
// # Closing
//
// Close commits what was processed, releases every partition (the next
// holder starts right there) and leaves, so the group's others get the
// partitions at once instead of after session_timeout. Give it a context
// of its own, as above: the loop's ctx has ended by then. Close handed an
// already-ended context (the loop's, the usual slip) does not take it as
// "skip the close": it closes within Config.RequestTimeout of its own and
// logs at info that it did. Honouring that context would commit nothing
// and leave the member for its session to time out, so whoever holds the
// partitions next reads again every record processed since the last
// timed commit — on every deploy, and silently, as few programs check
// Close's error; Kafka's own consumers always commit and leave on Close.
// A context that ends while Close runs does cut it short (ctx's error is
// returned, nothing more is committed): that bound was the caller's
// choice. Close must not be called from a hook; one that is, with the
// hook's ended context, returns at once.
//
// # Processing and commit rule
//
// Records returned by Poll count as processed when the next Poll, Commit
// or Close is called — or, with Config.ManualMarks, only once passed to
// Mark (or their offsets named in Commit). The offset committed for a
// partition is the offset after its last processed record. Processed
// offsets are committed every commit_interval (5s; also while no record
// arrives, so an idle consumer's progress is kept), on a revoke, on Close,
// and by Commit: without arguments for every held partition that moved,
// or exactly the offsets given (MarkAfter). A coordinator that does not
// answer is retried with backoff for request_timeout, and the next timed
// commit tries again (the consumer goes on consuming meanwhile); a
// partition whose capability expires is committed all the same (the
// coordinator decides) or its refusal returned, never left out.
//
// Commit waits for the coordinator's answer; CommitAsync does not: the
// commit goes in the background and its outcome comes on a channel (and
// in the log if it failed). Call CommitAsync in a poll loop that commits
// often: while no coordinator answers (a replica failing over takes
// ~1.5 s) Poll keeps delivering, and the requests made meanwhile are
// merged into one commit of the latest offsets. Commits other than
// releases go one at a time, so two never race; a release (revoke,
// Close) is always synchronous: the next holder starts at its offset.
//
// A granted partition starts at the group's committed offset. With
// nothing committed, it starts where the group's offset_reset says, or
// where this consumer's own Config.OffsetReset says ("earliest",
// "latest"; Kafka's auto.offset.reset): a committed offset always wins,
// the position a reset chose is committed like any other, and the
// group's stored settings never change.
//
// Fetches ask for raw record batches by default (Config.Raw), decoded
// here; JSON answers are read by a one-pass scanner.
//
// A fetch answered 404 (a wrong gateway URL, an unknown topic or
// partition) or a TLS handshake refused (certificate not trusted) is not
// retried: Poll and Commit return the error while the consumer releases
// every partition (final commit) and leaves, so the group's others can
// read them. Close still waits for that and returns the error.
//
// # Handoff
//
// When the coordinator revokes a partition (in a heartbeat) or a gateway
// answers 409 capability_revoked, the partition stops at once: its
// in-flight fetch is cancelled, its undelivered records are dropped, and
// no record of it is returned by Poll from then on. OnRevoke is called;
// once it returned and the records already returned by Poll are processed
// (the next Poll or Commit; at most revoke_timeout), the processed offset
// is committed with the partition's OLD capability and release:true. The
// next holder starts right there: nothing lost, nothing repeated. With
// Config.ManualMarks the same wait holds — a Mark of the last record Poll
// returned of the partition also ends it — and the offset committed is
// the marked one: records left unmarked are read again by the next
// holder, but never while this consumer still holds them. After
// revoke_timeout the partition is released at the processed offset
// anyway, and a warning names it: the next holder may then read records
// this consumer is still processing.
//
// Renewed capabilities arrive in heartbeats and replace the old one
// without moving the offset; a partition whose capability would expire
// within capability_expiry_margin without a renewal stops fetching until
// one arrives — a fetch retried after a retriable refusal (503
// out_of_sync, 429, no answer) too: it is given up there rather than
// sent with a capability the gateway must refuse, each refusal a failed
// verification the gateway charges to this member at this address, whose
// renewed capabilities it then refused 429 rate_limited for seconds.
// unknown_member, or token_expired on a heartbeat (the member
// token ran out), loses every partition (OnLost) and rejoins with the
// same instance id. A member an administrator removed (admin
// revoke-member, group delete --force) rejoins too, as Kafka's consumers
// do after RemoveMembersFromConsumerGroup, and says so at warn ("member
// revoked by an administrator: joining again"); what stops a consumer is
// denying its credential (admin revoke-capability JTI), which its next
// join meets: Poll then returns that error. Refusals are *Error values
// carrying the api reject table's code.
//
// A configuration no retry can mend stops the consumer at once, its
// error returned by Poll (and Join, Close): a URL whose scheme is not
// what its server's port speaks (*SchemeError), a TLS certificate not
// trusted, a gateway answering 404. A stopped consumer's error is logged
// at info only: it is the caller's to report.
//
// # Credential renewal
//
// The coordinator's member token never outlives the credential the
// member joined with (member_token_ttl, 24 h, or the credential's exp,
// whichever comes first). Before it expires (revoke_timeout + 2 ×
// request_timeout before, at most half its life) the consumer renews its
// member in place: a join by its member id with the current credential
// and its member token (renew_token), which keeps the member's
// partitions and epochs — no hook is called, nothing pauses, nothing in
// the group moves. That works when the current credential is the
// member's identity still: the same credential, an IdP token of the same
// subject, another token of the same OAuth client. Otherwise (another
// admin-minted credential, or no answer) every partition is revoked and
// released as in a rebalance (OnRevoke, processed offsets committed with
// the old capabilities), the member leaves, and a join with the current
// credential makes a new member that is granted partitions under fresh
// epochs — nothing lost, nothing delivered twice, a pause of the
// member's partitions. WithCredentialSource supplies the current credential
// (a refreshed IdP or OAuth token); without it Config.Credential is used,
// and once that expires the renewal's join is refused (401
// token_expired): the consumer has released everything, left, and stops
// with that error.
//
// # Gateways
//
// Every fetch starts at the gateway in use; on a connection error or a
// 5xx (503 not ready / out of sync) every fetch moves to the next one,
// and after all failed in a row, retries pause with a bounded jittered
// backoff.
//
// Each fetch is an HTTP/1.1 request on a connection of its own (one per
// partition, two while records flow and FetchAhead is on). The
// consumers of a process share a FetchPool: at most DefaultFetchPoolMax
// (1024) fetches in flight to one gateway address from all of them, and
// (without WithHTTPClient) one set of keep-alive connections to it, so
// 50 consumers of 40 partitions each hold 1,024 connections to a
// gateway, not 2,000 (a gateway serves max_connections_per_address, 2,000
// by default, from one address). The fetches past the bound wait their
// turn: a freed slot goes to the consumer holding fewest, each
// consumer's fetches in order, and one consumer holds at most its
// Config.GatewayFetchesMax. WithFetchPool gives consumers a pool of
// another size.
//
// Calls to the coordinator (join, heartbeats, commits, releases, leave)
// are bounded per replica: at most Config.CoordinatorConnectionsMax (64)
// of one consumer in flight to one replica, so as many connections
// there, whichever HTTP client carries them. A coordinator refuses every
// client of an address that holds max_connections_per_address (1,000 by
// default) with 503 overloaded.
//
// Concurrency: Poll is meant for one goroutine; Commit, CommitAsync,
// Mark, Assigned, MemberID and Close are safe from any goroutine. Hooks run one at a time on a
// goroutine of their own, in order; a hook may call Commit but not Close
// (Close waits for the revoke hook). Producer is safe for concurrent use.
package client
