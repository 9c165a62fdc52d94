package coordinator

// Behavior: POST /v1/groups/{group}/heartbeat — bearer: the member token
// (403 for another group; 409 unknown_member once the session is gone).
// Body api.HeartbeatRequest (may be empty). A long poll: the machine holds
// it up to wait_ms (capped by groups.heartbeat_wait; without wait_ms,
// heartbeat_wait; wait_ms 0 answers at once) until the member has news — partitions to revoke (apply before grants), new grants, renewals —
// and answers api.HeartbeatResponse (lists always present, maybe empty). A
// second heartbeat of the same member answers the held one empty. News
// whose capabilities cannot be minted answers 500 internal ("mint
// grants", "mint renewals"), the cause logged at ERROR with the group and
// member id (failHeartbeat), and is put back (group.RedeliverNews): the
// member's next heartbeat carries those grants, renewals and revokes
// again, at once — the same epochs, freshly minted. Before, the machine
// counted them as delivered and the member got a partition it owned only
// as a renewal, half a capability lease later. An answer lost on the
// wire (the client timed out, the connection was reset) this handler
// cannot see; the member's next heartbeat says resync: true and is
// answered at once with every partition it owns as a renewal (same
// epoch, freshly minted) and every revoke it has not released
// (group.Heartbeat.Resync). Each capability an answer mints takes a
// token of the member's tenant's tenant_member_rate, at most the burst
// into debt; what the rate has not paid for stays in the member's news
// for its next heartbeats (paceMints), the most urgent first (a partition
// the member cannot read, then the capability that ends soonest). When
// the rate pays for not all of an answer without revokes, the heartbeat
// is held on, within its wait, until the tokens reserved for those that
// come during it are the tenant's (group.DeferNews), and carries them
// all, instead of answered at once with one or none; a revoke for the
// member meanwhile answers it at once. Commits spend the tenant's
// tenant_commit_rate, not this rate (commit.go).

import (
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/leader"
)

func (c *Coordinator) handleHeartbeat(ctx *fasthttp.RequestCtx, params []string) {
	var req struct { // api.HeartbeatRequest, telling an absent wait_ms from 0
		WaitMs *int64 `json:"wait_ms"`
		Resync bool   `json:"resync"`
	}
	groupName, claims, ok := c.memberRequest(ctx, params, &req, true)
	if !ok {
		return
	}
	if req.WaitMs != nil && *req.WaitMs < 0 {
		hw := c.cfg.Groups.HeartbeatWait
		writeErrorDetails(ctx, api.CodeBadRequest,
			fmt.Sprintf("wait_ms %d is outside [0, %d] (0s to %s: coordinator.groups.heartbeat_wait; 0 answers at once, more is held %s)",
				*req.WaitMs, hw.Milliseconds(), hw, hw),
			map[string]any{"field": "wait_ms", "min": 0, "max": hw.Milliseconds()})
		return
	}
	wait := heartbeatWait(req.WaitMs)
	confirm := c.leadershipMark()
	tenant := c.share.memberTenant(groupName, claims.Subject)
	var until time.Time // when the machine's hold of it ends at the latest
	msg, shared, err := c.callShared(ctx, tenant, func(ref group.Ref) group.Event {
		until = time.Now().Add(c.heldAtMost(wait))
		return group.Heartbeat{Ref: ref, Group: groupName, MemberID: claims.Subject, Wait: wait, Resync: req.Resync}
	})
	if !shared {
		return
	}
	news, ok := c.confirmedNews(ctx, msg, err, confirm)
	if !ok {
		return
	}
	// A token a capability; what the rate has not paid for comes in the
	// member's next heartbeats. When it pays for not all, the heartbeat
	// is held again until the tokens that come within its hold are the
	// tenant's (held).
	news, held := c.paceMints(tenant, news, until)
	if held != nil {
		confirm = c.leadershipMark()
		msg, err = c.call(func(ref group.Ref) group.Event {
			held.Ref = ref
			return *held
		})
		if news, ok = c.confirmedNews(ctx, msg, err, confirm); !ok {
			return
		}
		news, _ = c.paceMints(tenant, news, time.Time{}) // paid for: no second hold
	}
	memberExp := time.Unix(int64(claims.ExpiresAt), 0) // no capability outlives the member token
	grants, err := c.mintGrants(news.Grants, true, memberExp)
	if err != nil {
		c.failHeartbeat(ctx, news, "mint grants", err)
		return
	}
	renew, err := c.mintGrants(news.Renew, false, memberExp)
	if err != nil {
		c.failHeartbeat(ctx, news, "mint renewals", err)
		return
	}
	revoke := news.Revoke
	if revoke == nil {
		revoke = []api.PartitionRef{}
	}
	writeJSON(ctx, fasthttp.StatusOK, api.HeartbeatResponse{Revoke: revoke, Grants: grants, Renew: renew})
}

// confirmedNews is the machine's answer msg to a heartbeat once the log
// confirmed this replica led after confirm's mark, or false when it
// answered the refusal.
func (c *Coordinator) confirmedNews(ctx *fasthttp.RequestCtx, msg group.Message, err error, confirm func(leader.Answer) error) (group.News, bool) {
	news, ok := msg.(group.News)
	if !ok {
		writeMachineError(ctx, msg, err)
		return news, false
	}
	answer := leader.AnswerNews
	if len(news.Grants)+len(news.Renew) > 0 {
		answer = leader.AnswerCapabilities
	}
	// Capabilities leave only once the log confirmed this replica led
	// after the heartbeat arrived (sync.go's leadershipMark): a deposed
	// leader renews nothing from memory. Free when a persist or beat
	// happened while the heartbeat was held.
	if err := confirm(answer); err != nil {
		writeNotLeader(ctx, "", "this replica no longer leads the shard")
		return news, false
	}
	return news, true
}

// heldAtMost is how long the machine holds a heartbeat of wait
// (heartbeatWait's): at most groups.heartbeat_wait, which a zero wait
// means.
func (c *Coordinator) heldAtMost(wait time.Duration) time.Duration {
	if hw := c.cfg.Groups.HeartbeatWait; wait <= 0 || wait > hw {
		return hw
	}
	return wait
}

// failHeartbeat answers a heartbeat whose news could not be minted: the
// news goes back to the machine for the member's next heartbeat
// (redeliverNews), the cause at ERROR with the group and member (the
// error names claims, never a token or key), as failJoin does, and 500
// internal.
func (c *Coordinator) failHeartbeat(ctx *fasthttp.RequestCtx, news group.News, what string, cause error) {
	fields := []zap.Field{zap.String("group", news.Group), zap.String("member_id", news.MemberID), zap.Error(cause)}
	err := c.redeliverNews(news)
	if err != nil {
		fields = append(fields, zap.NamedError("redeliver_error", err))
	}
	fields = append(fields, zap.Bool("news_kept", err == nil))
	c.log.Error("heartbeat: "+what+" failed; answered 500", fields...)
	writeError(ctx, api.CodeInternal, what)
}

// redeliverNews hands news the member never got back to the machine
// (group.RedeliverNews), so its next heartbeat carries it. A member that
// is gone meanwhile needs nothing.
func (c *Coordinator) redeliverNews(news group.News) error {
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.RedeliverNews{Ref: ref, News: news}
	})
	switch r := msg.(type) {
	case group.Done:
		return nil
	case group.Rejected:
		if r.Code == api.CodeUnknownMember {
			return nil
		}
		return fmt.Errorf("redeliver news: %s: %s", r.Code, r.Message)
	}
	if err == nil {
		err = fmt.Errorf("redeliver news: unexpected answer %T", msg)
	}
	return err
}

// heartbeatWait is the machine's Wait for wait_ms: absent, 0 (the
// machine's heartbeat_wait); an explicit 0, a nanosecond — answered at
// once, as "held up to wait_ms" says. The machine reads a zero Wait as
// heartbeat_wait, so wait_ms: 0 was held the whole heartbeat_wait (3 s in
// capgate dev) by a client that asked not to wait.
func heartbeatWait(waitMs *int64) time.Duration {
	switch {
	case waitMs == nil:
		return 0
	case *waitMs == 0:
		return time.Nanosecond
	}
	return time.Duration(min(*waitMs, 1<<40)) * time.Millisecond
}
