package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// attempt carries out one request attempt the driver asked for and
// reports its outcome. It runs in its own goroutine, without the lock.
func (c *Consumer) attempt(ctx context.Context, s driver.Send) driver.Answered {
	a := driver.Answered{Call: s.Call}
	var err error
	switch s.Kind {
	case driver.KindJoin:
		var credential string
		if credential, err = c.credential(ctx); err == nil {
			err = c.tr.postKeyed(ctx, "join", c.groupURL("join"), credential, s.JoinKey, c.boundCredential(*s.Join, credential), &a.Join)
		}
		if err == nil {
			c.bound.Store(&credential)
		}
	case driver.KindHeartbeat:
		err = c.tr.postJSON(ctx, "heartbeat", c.groupURL("heartbeat"), s.Token, api.HeartbeatRequest{WaitMs: s.Wait.Milliseconds(), Resync: s.Resync}, &a.News)
		c.logNews(a.News, err, s.Token)
	case driver.KindCommit:
		var resp api.CommitResponse
		err = c.tr.postJSON(movingOn(ctx, s), "commit", c.groupURL("commit"), s.Token, *s.Commit, &resp)
		c.logCommit(*s.Commit, err)
	case driver.KindLeave:
		err = c.tr.postJSON(ctx, "leave", c.groupURL("leave"), s.Token, api.LeaveRequest{}, nil)
	case driver.KindFetch:
		a.Fetched, err = c.fetcher.fetchFrom(ctx, s.Gateway, *s.Fetch, s.Timeout)
		c.logFetch(s, err)
		c.noteFetch(s.Gateway, err)
	}
	a.Now = time.Now()
	if err != nil {
		a.Failure = failureOf(err)
	}
	return a
}

// credential is what a join presents: the credential source's current
// one, else Config.Credential.
func (c *Consumer) credential(ctx context.Context) (string, error) {
	if c.opts.credentials == nil {
		return c.cfg.Credential, nil
	}
	credential, err := c.opts.credentials(ctx)
	if err == nil && credential == "" {
		err = errors.New("empty credential")
	}
	if err != nil {
		return "", fmt.Errorf("client: credential source: %w", err)
	}
	return credential, nil
}

// boundCredential is join req as sent with bearer credential: a
// renewal (renew_token) presenting another credential than the one its
// member is bound to carries that one too, as renew_credential — a
// credential source handing out a new admin-minted credential of the
// same name renews the member in place then (api.JoinRequest), where the
// member was renewed anew before (released, left, joined: its
// partitions went to the others and came back, in every renewal). One
// that proves nothing (an OAuth client's, whose renewal the coordinator
// takes by its client id anyway; one expired meanwhile) changes
// nothing: the coordinator ignores it.
func (c *Consumer) boundCredential(req api.JoinRequest, credential string) api.JoinRequest {
	if b := c.bound.Load(); req.RenewToken != "" && b != nil && *b != credential {
		req.RenewCredential = *b
	}
	return req
}

// failureOf describes a failed attempt for the driver: a refusal's code,
// status, Retry-After and offset bounds; no code when nothing answered.
func failureOf(err error) *driver.Failure {
	f := &driver.Failure{Err: err, Earliest: -1, Latest: -1}
	var e *Error
	if errors.As(err, &e) {
		f.Code, f.Status, f.RetryAfter = e.Code, e.Status, e.RetryAfter
		f.Earliest, f.Latest = e.detailOffset("earliest"), e.detailOffset("latest")
		f.Removed, _ = e.Details[api.DetailRemoved].(string)
	}
	var scheme *SchemeError
	switch {
	case errors.As(err, &scheme):
		f.Final = true // its message says what to change
	case tlsRefused(err):
		f.Final = true
		f.Err = fmt.Errorf("%w (a TLS certificate problem: not retried; check the CA: Config.TLS.CAFile or WithTLS, the CLI's --cacert)", err)
	}
	return f
}

// configError reports a failure no retry can mend because the
// configuration is wrong: a URL's scheme that is not what its server
// speaks, or a TLS handshake refused. The consumer stops with it
// (failureOf marks it Final); it is not a server that did not answer.
func configError(err error) bool {
	var scheme *SchemeError
	return errors.As(err, &scheme) || tlsRefused(err)
}

// tlsRefused reports a TLS handshake that no retry can mend: the
// server's certificate was not trusted (unknown authority, wrong name,
// expired), the server refused ours (a TLS alert), or the server does not
// speak TLS at all (a SchemeError when it came through transport.do).
func tlsRefused(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		op       *net.OpError
	)
	if errors.As(err, &op) && op.Op == "remote error" { // crypto/tls: the peer sent an alert
		return true
	}
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header)
}

// logNews logs partitions and epochs, never capabilities; failures at
// most once per unansweredLogEvery (beatFailures), and the first answer
// after them.
func (c *Consumer) logNews(n api.HeartbeatResponse, err error, token string) {
	var e *Error
	switch {
	case err == nil:
		if ok, failures, since := c.beatFailures.answered(); ok {
			c.log.Info("heartbeat answered again: the coordinator is back", zap.Int("failures", failures),
				zap.Duration("after", time.Since(since).Round(time.Millisecond)))
		}
	case errors.Is(err, context.Canceled):
		return
	case errors.As(err, &e) && e.Code == api.CodeUnknownMember:
		// The member was removed (the driver rejoins; logRemoved says
		// why), or it left on its own: Close or a credential renewal, its
		// own held heartbeat answered after the leave — expected, so only
		// at debug (newuser3 #7).
		level := zap.InfoLevel
		if c.memberLeft(token) {
			level = zap.DebugLevel
		}
		c.log.Log(level, "heartbeat: member unknown to the coordinator", zap.Error(err))
		return
	default:
		if log, missed := c.beatFailures.failed(time.Now()); log {
			c.log.Warn("heartbeat failed; retrying", zap.Int("failures_not_logged", missed), zap.Error(err))
		}
		return
	}
	if ce := c.log.Check(zap.DebugLevel, "heartbeat news"); ce != nil && len(n.Revoke)+len(n.Grants)+len(n.Renew) > 0 {
		ce.Write(zap.Strings("revoke", revokeNames(n.Revoke)), zap.Strings("grants", grantNames(n.Grants)), zap.Strings("renew", grantNames(n.Renew)))
	}
}

// memberLeft reports whether the member a heartbeat carrying token was
// sent for has left on its own since: the session sent its leave (Close,
// or a renewal: Leaving, then Rejoining) or stopped, or it is another
// member now (the renewal's join answered).
func (c *Consumer) memberLeft(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.d.Session()
	switch s.Status() {
	case session.Leaving, session.Rejoining, session.Stopped:
		return true
	}
	return s.Member().Token != token
}

func grantNames(grants []api.Grant) []string {
	out := make([]string, len(grants))
	for i, g := range grants {
		out[i] = Partition{Topic: g.Topic, Partition: g.Partition}.String()
	}
	return out
}

// revokeNames are revokes as a log line shows them ("orders/3").
func revokeNames(revokes []api.PartitionRef) []string {
	out := make([]string, len(revokes))
	for i, r := range revokes {
		out[i] = Partition{Topic: r.Topic, Partition: r.Partition}.String()
	}
	return out
}

// logCommit logs partitions and offsets, never the capabilities.
func (c *Consumer) logCommit(r api.CommitRequest, err error) {
	fields := make([]zap.Field, 0, len(r.Offsets)+2)
	fields = append(fields, zap.Bool("release", r.Release), zap.Error(err))
	for _, o := range r.Offsets {
		fields = append(fields, zap.Int64(Partition{Topic: o.Topic, Partition: o.Partition}.String(), o.Offset))
	}
	var e *Error
	switch {
	case err != nil && r.Release && errors.As(err, &e) && e.Code == api.CodeUnknownMember:
		// The member is gone (revoked by an administrator, or expired):
		// its partitions were fenced with it, no handoff waits for this
		// release. A warning per partition said otherwise.
		c.log.Info("release not needed: the member is gone and its partitions were fenced with it", fields...)
		return
	case err != nil && r.Release && errors.As(err, &e) && e.Code == api.CodeStaleEpoch:
		// The partition is at a newer epoch already: an administrator's
		// offsets reset or revoke fences and moves it at once (a reset
		// of a live group does, every partition), or its handoff ended
		// without this release. Nothing waits for it; a warning said a
		// handoff timeout would follow, which never did.
		c.log.Info("release not needed: the partition is at a newer epoch already (an administrator reset its offset or revoked it, or its handoff ended); its offsets were not committed, the partition goes on from the offset the coordinator holds", fields...)
		return
	case err != nil && r.Release:
		c.log.Warn("release commit failed; the coordinator moves the partition after its handoff timeout", fields...)
		return
	}
	c.log.Debug("committed", fields...)
}

// logFetch logs a refused fetch (not a cancelled one); a retriable
// refusal at most once per unansweredLogEvery and code (refusalLog).
func (c *Consumer) logFetch(s driver.Send, err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	log := c.log.Warn
	fields := []zap.Field{zap.Stringer("partition", s.Fetch.Partition), zap.Uint64("epoch", s.Fetch.Epoch),
		zap.Int64("offset", s.Fetch.Offset), zap.String("gateway", c.fetcher.url(s.Gateway)),
		zap.String("code", string(e.Code)), zap.String("message", e.Message)}
	switch {
	case e.Code == api.CodeCapabilityRevoked:
		log = c.log.Debug // the partition moved: a handoff, told by the next heartbeat too
	case e.Code == api.CodeNotFound:
		log = c.log.Debug // the consumer stops with it: Poll returns it (driver: fatal)
	case api.IsRetriable(e.Code):
		due, missed := c.refusals.refused(e.Code, time.Now())
		if !due {
			return
		}
		fields = append(fields, zap.Int("refusals_not_logged", missed))
	}
	log("fetch refused", fields...)
}
