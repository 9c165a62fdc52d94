package kafkaproto

// Behavior: a KIP-848 SubscribedTopicRegex from a credential that does
// not allow every topic (its topics a list or prefixes: "orders-*").
//
//   - capgate's coordinator takes a topic_pattern only with a credential
//     for any topic (*): it matches the pattern against all of Kafka's
//     topics, so with a narrower credential the member would be granted
//     topics the credential does not cover. Such a join was refused
//     GROUP_AUTHORIZATION_FAILED, and kgo retries that for ever: the
//     consumer read nothing, and only kgo's own log said why.
//   - The listener matches the regex itself instead — against the whole
//     name, as Kafka and the coordinator do (topicpattern.Parse's
//     anchoring) — over its topic list, keeps the topics the connection
//     may see (its credential allows them, not internal: conn.sees) and
//     joins with those names. Kafka's broker does the same with ACLs: a
//     regex subscription takes the matching topics the principal may
//     describe. Nothing rests on the listener's match: the coordinator
//     checks every name against the credential as for any named join.
//   - At each heartbeat, once the topic list was read again since the
//     last match (topicCacheAge, a second when a join refreshed it), the
//     regex is matched again; a different set — a topic created or
//     deleted — changes the member's subscription (member.resubscribe, as
//     a client's own change). A set that became empty keeps the topics it
//     had (the coordinator keeps no member of no topics; a deleted
//     topic's partitions go with it).
//   - A regex matching no topic the credential allows is answered
//     UNKNOWN_TOPIC_OR_PARTITION (retriable: the client joins again, and
//     is in once such a topic exists), with a message naming the regex
//     and what the credential allows, logged at warn once per client,
//     group and regex every missingTopicRepeat — in Kafka the member
//     would sit with an empty assignment, but a capgate member holds at
//     least one topic. An invalid regex is INVALID_REGULAR_EXPRESSION.
//   - A credential for any topic (*) keeps the coordinator's matching
//     (topic_pattern: the coordinator follows topics as its metadata
//     reads find them).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/topicpattern"
)

// regexSub is a KIP-848 member's regex the listener matches itself: the
// text the client sent, compiled, and the topic list's gen it was last
// matched against.
type regexSub struct {
	text string
	re   *topicpattern.Matcher
	gen  uint64
}

// matchesOwnRegex reports whether c's SubscribedTopicRegex is matched by
// the listener (matchRegex) rather than sent as topic_pattern: the
// coordinator takes a pattern only from a credential for any topic.
func (c *conn) matchesOwnRegex() bool {
	p := c.principal
	return p != nil && !p.capability() && !p.Claims.AllowsTopic("*")
}

// compileTopicRegex compiles a KIP-848 regex as capgate's coordinator
// does (coordinator/group.CompileTopicPattern): parsed alone and matched
// against the whole topic name (topicpattern.Parse), and bounded first by
// the coordinator's default rule for topic_pattern (group's
// checkPatternCost): the listener matches it over every topic at each
// join and rematch, and a 40 KB regex took 36 s over 1,000 names
// (review23). Its length is bounded, and what its repetitions add beyond
// it (topicpattern.Expansion), not its cost whole: a list of topic names
// written as an alternation costs about its length — a 30-name one (450
// bytes) joined over HTTP and was INVALID_REGULAR_EXPRESSION here. Its
// matches are counted (topicpattern.Matcher): within the cost bound,
// `(.?){60}x` fails slowly on every name (redteam18).
func compileTopicRegex(text string) (*topicpattern.Matcher, error) {
	if len(text) > topicpattern.DefaultMaxBytes {
		return nil, fmt.Errorf("longer than %d bytes", topicpattern.DefaultMaxBytes)
	}
	if more := topicpattern.Expansion(text); more > topicpattern.DefaultMaxCost {
		return nil, fmt.Errorf("too complex: %d instructions once repetitions are expanded, %d more than its %d bytes, at most %d more",
			topicpattern.Cost(text), more, len(text), topicpattern.DefaultMaxCost)
	}
	return topicpattern.Compile(text)
}

// matchRegex matches text (compiled anew unless prev holds it) over the
// topic list (read again when a second old with refresh) and answers the
// sorted topics c may see, and the regexSub to keep; else the heartbeat's
// error code and message (group: the log line's).
func (c *conn) matchRegex(group, text string, prev *regexSub, refresh bool) ([]string, *regexSub, int16, string) {
	rs := &regexSub{text: text}
	if prev != nil && prev.text == text {
		rs.re = prev.re
	} else {
		re, err := compileTopicRegex(text)
		if err != nil {
			return nil, nil, kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %.100q: %v", text, err)
		}
		rs.re = re
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	topics, _, gen, err := c.s.topics.getGen(ctx, refresh)
	if err != nil {
		return nil, nil, kerr.CoordinatorNotAvailable.Code, "the gateway cannot read Kafka's topics to match SubscribedTopicRegex: " + err.Error()
	}
	rs.gen = gen
	match, ok := c.s.regexes.cached(text, gen)
	if !ok {
		tenant, now := c.principal.tenant(), time.Now()
		if !c.s.regexes.mayRun(tenant, now) {
			return nil, nil, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("this credential's KIP-848 regexes take more than %d steps a second to match against the gateway's topics: "+
				"SubscribedTopicRegex %.100q is matched once that is paid (retried)", regexStepsPerSecond, text)
		}
		scan := rs.re.Scanner(topicpattern.DefaultMaxSteps)
		match = regexMatch{gen: gen}
		for name := range topics {
			if scan.Match(name) {
				match.names = append(match.names, name)
			}
		}
		match.over = scan.Over()
		c.s.regexes.ran(tenant, text, match, scan.Steps(), now)
	}
	if match.over {
		// Each join and rematch ran this on the request's goroutine,
		// before anything reaches the coordinator: `(.?){60}x` took 1.1 s
		// of a core over 10,000 names, at every heartbeat of every
		// connection that sent it (redteam18).
		return nil, nil, kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %.100q takes more than %d steps to match against the gateway's %d topics: "+
			"a regex that can skip ahead many ways tries each way at every character of every name; anchor it with literal text (orders-.*), or subscribe by name",
			text, topicpattern.DefaultMaxSteps, len(topics))
	}
	var names []string
	for _, name := range match.names {
		if c.sees(name, topics[name]) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		why := fmt.Sprintf("SubscribedTopicRegex %.100q matches no topic this credential allows (it allows %s): "+
			"joined once such a topic exists", text, strings.Join(shownTopics(c.principal.Claims.Topics), ", "))
		if now := time.Now(); len(c.s.missing.fresh(c.key(), group, []string{"regex:" + text}, now)) > 0 {
			c.s.missing.lines.LineAt(now, "kafka member's topic regex matches no topic its credential allows: "+
				"answered UNKNOWN_TOPIC_OR_PARTITION (the client joins again, and is in once such a topic exists)",
				zap.String("group", group), zap.String("topic_regex", shownTopics([]string{text})[0]),
				zap.Strings("credential_topics", shownTopics(c.principal.Claims.Topics)),
				zap.String("client_id", loggedClientID(c.clientID)), zap.String("remote", c.nc.RemoteAddr().String()))
		}
		return nil, nil, kerr.UnknownTopicOrPartition.Code, why
	}
	return names, rs, 0, ""
}

// rematchRegex matches m's regex again when the topic list was read since
// its last match, and answers the topics and regexSub to resubscribe
// with when the set differs from what m joined with (changed).
func (c *conn) rematchRegex(m *member) (names []string, rs *regexSub, changed bool) {
	m.mu.Lock()
	prev, joined := m.regex, slices.Clone(m.join.Topics)
	m.mu.Unlock()
	if prev == nil {
		return nil, nil, false
	}
	if _, _, gen, err := c.s.topics.getGen(c.ctx, false); err != nil || gen == prev.gen {
		return nil, nil, false
	}
	names, rs, code, _ := c.matchRegex(m.group, prev.text, prev, false)
	if code != 0 {
		return nil, nil, false // none left (deleted): keep what it has
	}
	slices.Sort(joined)
	if slices.Equal(names, joined) {
		m.mu.Lock()
		if m.regex == prev {
			m.regex = rs // the same set: matched against this gen
		}
		m.mu.Unlock()
		return nil, nil, false
	}
	return names, rs, true
}

// resubscribeRegex changes m's subscription to names, the topics its
// regex rs matches; the heartbeat's error code.
func (c *conn) resubscribeRegex(m *member, names []string, rs *regexSub) int16 {
	code := resubscribeError(m.resubscribe(c.ctx, names, ""))
	if code == 0 {
		m.awaiting(nil, nil)
		m.setRegex(rs)
	}
	return code
}

// setRegex records the regex m's topics were matched by (nil: the client
// subscribes by name, or the coordinator matches its pattern).
func (m *member) setRegex(rs *regexSub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.regex = rs
}
