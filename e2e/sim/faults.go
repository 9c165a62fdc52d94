package sim

import "time"

// bugs are planted bugs: each makes one part misbehave the way a real
// bug would, so a test can prove the checker meant for it fires. Only the
// tests switch them on.
type bugs struct {
	ackBeforeApply      bool // gateway acknowledges a sync update before applying it (checker 3)
	keepVictims         bool // gateway acknowledges a revocation without cancelling the fetches it refuses (checker 3)
	noSelfFence         bool // gateway keeps admitting after sync_timeout (checker 1)
	shortGatewayTimeout bool // coordinator's gateway_timeout below the gateways' sync_timeout (checker 4)
	serveCountedSilent  bool // gateways serve while cut off (silent_gateways: serve) but the coordinator counts their silence (checker 4)
	sendBeforePersist   bool // coordinator sends a Ready's messages although its persist failed (checker 2)
	deliverAfterRevoke  bool // consumer hands the user a cancelled fetch's records (checker 7)
	commitAhead         bool // consumer commits one record past what it processed (checker 5)
	storeLosesOffsets   bool // the coordinator's persist mapping drops every odd committed offset (checker 6)
	serveBeforeLogEnd   bool // a replica taking over restores what it had read before the log's end (checker 2)
	answerUnconfirmed   bool // a replica answers sync polls and capability renewals from memory without the log's confirmation (leader.MustConfirm ignored)
	barriersUncounted   bool // a replica's shell steps its follower's position without Barriers (every barrier counts as a live leader: checker 9)
	renewFences         bool // the coordinator's shell takes a renewal (renew_token) for a plain rejoin by member id: it fences (TestRenewalsMoveNothing)
	joinKeyIgnored      bool // the coordinator's join handler drops the Idempotency-Key: a repeated join makes another member (checker 10)
}

// drainMax bounds the heal-and-drain phase.
const drainMax = 3 * time.Minute

// armFaults starts every fault schedule the profile asks for.
func (w *World) armFaults() {
	w.every(w.prof.churnEvery, evChurn, -1, w.churn)
	switch {
	case w.prof.coordCrash > 0 && len(w.coords) > 1:
		w.every(w.prof.coordCrash, evCoordCrash, -1, w.crashReplica)
	case w.prof.coordCrash > 0:
		w.every(w.prof.coordCrash, evCoordCrash, coordNode, w.coord.crash)
	}
	if w.prof.replicas.pauseEvery > 0 {
		w.every(w.prof.replicas.pauseEvery, evReplica, -1, w.pause)
	}
	if w.prof.gatewayCrash > 0 {
		w.every(w.prof.gatewayCrash, evGatewayCrash, -1, func() {
			w.gateways[w.rng.IntN(len(w.gateways))].crash()
		})
	}
	if w.prof.cutEvery > 0 {
		w.every(w.prof.cutEvery, evCut, -1, w.cut)
	}
	if w.prof.adminEvery > 0 {
		w.every(w.prof.adminEvery, evAdmin, w.adminNode(), w.admin)
	}
	if w.prof.stuckEvery > 0 {
		w.every(w.prof.stuckEvery, evGatewayStuck, -1, func() {
			w.gateways[w.rng.IntN(len(w.gateways))].stick(w.between(100*time.Millisecond, w.prof.stuckMax))
		})
	}
	switch {
	case w.prof.rogueEvery > 0 && w.prof.rogueIDs > 0:
		w.every(w.prof.rogueEvery, evRogue, w.adminNode(), w.rogueFleetPoll)
	case w.prof.rogueEvery > 0:
		w.every(w.prof.rogueEvery, evRogue, w.adminNode(), w.roguePoll)
	}
	if w.prof.growBy > 0 {
		w.at(w.prof.growAt, evGrow, -1, func() {
			w.kafka.grow(w.prof.growTopic, w.prof.growBy)
			for _, c := range w.coords {
				c.refreshTopics()
			}
		})
	}
	if w.prof.createCount > 0 {
		w.at(w.prof.createAt, evGrow, -1, func() {
			w.kafka.grow(1, w.prof.createCount) // from no partitions: created
			for _, c := range w.coords {
				c.refreshTopics()
			}
		})
	}
}

// admin sends an operator's request: revoke a random partition (the
// answer comes once every gateway is safe for the fence), deny the last
// capability minted for one, or revoke a member.
func (w *World) admin() {
	id := w.kafka.parts[w.rng.IntN(len(w.kafka.parts))]
	req := &request{kind: reqRevoke, from: w.adminNode(), partition: id, reply: func(response) {}}
	switch r := w.rng.IntN(10); {
	case r >= 8:
		c := w.consumers[w.rng.IntN(len(w.consumers))]
		if c.member() == "" {
			return
		}
		req.kind, req.member = reqRevokeMember, c.member()
	case r >= 6 && w.prof.denyJTI:
		claims := w.tokens.latest[id]
		if claims == nil {
			return
		}
		req.kind, req.jti, req.expires = reqDeny, claims.ID, time.Unix(int64(claims.ExpiresAt), 0)
	}
	if w.tracing() {
		w.tracef("admin request kind %d partition %s member %s jti %s", req.kind, req.partition, req.member, req.jti)
	}
	w.sendCoordinator(w.adminNode(), false, req)
}

// roguePoll sends one poll as gateway "rogue" (rogueGateway), as a
// sync-token holder that acknowledges nothing would: after=0 (each
// answer a reset), or with rogueStale the seq of its first answer, for
// ever. It serves no fetch, so no checker looks at it; it only must not
// stall handoffs past gateway_timeout (silent_gateways: fence) or make a
// revocation complete early (serve). It stops with the faults and is
// then silent.
func (w *World) roguePoll() {
	w.stats.RoguePolls++
	req := &request{kind: reqSync, from: w.adminNode(), gateway: rogueGateway, after: w.rogueAfter, wait: w.prof.gateway.syncWait,
		call: call{deadline: w.now + w.prof.gateway.syncTimeout}, reply: func(r response) {
			if w.prof.rogueStale && w.rogueAfter == 0 && !r.transport && r.code == "" {
				w.rogueAfter = r.sync.Seq
			}
		}}
	w.sendCoordinator(w.adminNode(), true, req)
}

// leaveOnBehalf removes the rogue's gateway id (name; "": "rogue") at
// the heal — or, under serve, a dead gateway's old id (fill.go) —, as an operator
// who saw it lagging would (POST /v1/sync/leave on its behalf, after
// rotating the sync token): under silent_gateways serve a silent id is
// never safe, and every handoff of the drain would wait for the revoked
// capabilities to expire. Retried until answered.
func (w *World) leaveOnBehalf(name string) {
	req := &request{kind: reqGatewayLeave, from: w.adminNode(), gateway: rogueGateway, name: name,
		call: call{deadline: w.now + w.prof.gateway.syncTimeout}}
	again := func() { w.leaveOnBehalf(name) }
	req.call.timeout = func() { w.after(time.Second, evRogue, w.adminNode(), again) }
	req.reply = func(r response) {
		if r.transport || r.code != "" {
			w.after(time.Second, evRogue, w.adminNode(), again)
		}
	}
	w.sendCoordinator(w.adminNode(), true, req)
}

// every runs fn at exponentially distributed intervals of mean until the
// faults heal.
func (w *World) every(mean time.Duration, kind eventKind, node int, fn func()) {
	w.after(w.exponential(mean), kind, node, func() {
		if w.healed {
			return
		}
		fn()
		w.every(mean, kind, node, fn)
	})
}

// churn changes the membership: a consumer starts, leaves, crashes
// (kill -9, often restarting later with its instance id) or freezes.
func (w *World) churn() {
	var running, down []*consumer
	for _, c := range w.consumers {
		switch c.state {
		case consumerRunning:
			running = append(running, c)
		case consumerDown:
			down = append(down, c)
		}
	}
	switch r := w.rng.IntN(10); {
	case (r < 3 || len(running) == 0) && len(down) > 0:
		down[w.rng.IntN(len(down))].boot()
	case r < 5 && len(running) > 1:
		running[w.rng.IntN(len(running))].close()
	case r < 7 && len(running) > 0:
		w.crashConsumer(running[w.rng.IntN(len(running))])
	case r < 9 && len(running) > 0:
		w.freezeConsumer(running[w.rng.IntN(len(running))])
	}
}

func (w *World) crashConsumer(c *consumer) {
	c.crash()
	if w.chance(0.7) {
		w.after(w.between(time.Second, 15*time.Second), evChurn, c.node, func() {
			if c.state == consumerDown && !w.healed {
				c.boot()
			}
		})
	}
}

// freezeConsumer stops a consumer, mostly for longer than its session.
func (w *World) freezeConsumer(c *consumer) {
	session := w.prof.machine.SessionTimeout
	d := w.between(session+time.Second, 2*session)
	if w.chance(0.3) {
		d = w.between(time.Second, session)
	}
	c.freeze(d)
}

// cut starts a network partition: a node cut off from everyone, or one
// link cut.
func (w *World) cut() {
	d := w.between(100*time.Millisecond, w.prof.cutMax)
	w.stats.Partitions++
	gw := w.gatewayNode(w.rng.IntN(len(w.gateways)))
	consumer := w.consumerNode(w.rng.IntN(len(w.consumers)))
	switch w.rng.IntN(4) {
	case 0:
		w.net.isolate(w.rng.IntN(w.adminNode()), d)
	case 1:
		w.net.cutLink(gw, w.coords[w.rng.IntN(len(w.coords))].node, d)
	case 2:
		w.net.cutLink(consumer, w.coords[w.rng.IntN(len(w.coords))].node, d)
	default:
		w.net.cutLink(consumer, gw, d)
	}
}

// heal ends the faulty phase: partitions heal, crashed nodes restart,
// frozen consumers thaw, the producer stops, and no new fault starts.
func (w *World) heal() {
	w.healed = true
	w.tracef("heal")
	w.net.healAll()
	w.kafka.stopped = true
	for _, c := range w.coords {
		if !c.up {
			c.restart()
		}
		if c.rep != nil {
			c.resume()
		}
	}
	for _, g := range w.gateways {
		g.stuckUntil = 0
		if !g.up {
			g.boot()
		}
	}
	for _, c := range w.consumers {
		c.thaw()
	}
	switch {
	case w.prof.rogueEvery > 0 && w.prof.rogueIDs > 0:
		for k := range w.prof.rogueIDs {
			w.leaveOnBehalf(rogueName(k))
		}
	case w.prof.rogueEvery > 0:
		w.leaveOnBehalf("")
	}
	w.leaveOldIDs()
	w.keepOneRunning()
}

// keepOneRunning starts a consumer when none runs (one may have been
// leaving when the faults healed).
func (w *World) keepOneRunning() {
	for _, c := range w.consumers {
		if c.state == consumerRunning {
			return
		}
	}
	w.consumers[0].boot()
}

// drain runs until every record was delivered at least once (or drainMax
// passes), then checks that nothing was lost.
func (w *World) drain() {
	deadline := w.now + drainMax
	w.drainCheck()
	w.loop(deadline)
	if w.failure == nil {
		for _, c := range w.coords {
			c.checkAnswered()
		}
	}
	if w.failure == nil {
		w.check.checkNoLostRecord()
	}
}

// drainCheck stops the loop once every record was delivered.
func (w *World) drainCheck() {
	if w.check.allDelivered() {
		w.stopped = true
		return
	}
	w.keepOneRunning()
	w.after(500*time.Millisecond, evDrainCheck, -1, w.drainCheck)
}
