package kafkaclients

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestKgoRegexOfATopicListJoins: the listener bounds a KIP-848
// SubscribedTopicRegex by the coordinator's rule for topic_pattern
// (what its repetitions add beyond its length, topicpattern.Expansion),
// so a list of 30 topic names written as an alternation (391 bytes, cost
// 365) — which joins over HTTP — joins through the listener too: a kgo
// consumer subscribing to it by regex (KIP-848) reads what its names
// hold, and nothing of a topic the credential allows but the regex does
// not name. It was INVALID_REGULAR_EXPRESSION (the cost counted whole,
// past 256: kgo sends it as `.*(?:(?:…))…`, 403 bytes, cost 371) and the
// consumer read nothing. A regex closing the
// listener's anchoring group itself, `x)|(?:.*`, is refused
// INVALID_REGULAR_EXPRESSION: it read `^(?:x)|(?:.*)$` and joined with
// every topic the credential allows.
func TestKgoRegexOfATopicListJoins(t *testing.T) {
	names := make([]string, 30)
	for i := range names {
		// No two neighbours share a first letter: Go's parser factors an
		// alternation's common prefixes out, and the list would cost less.
		names[i] = fmt.Sprintf("%c%c-orders-%02d", 'a'+i%26, 'a'+i*7%26, i)
	}
	outside := "zz-orders-99" // allowed, not in the regex
	s := startWithTopics(t, append([]string{outside}, names...))
	group := "regex-list"
	cred := regexCredential(t, s, "regex-list", []string{group, group + "-raw"}, append([]string{outside}, names...))
	for _, topic := range []string{names[0], names[17], names[29], outside} {
		produceDirect(t, s, topic, 0, 3)
	}

	list := "(" + strings.Join(names, "|") + ")"
	m := joinGroup(t, s, "regex-list-1", group, cred, kip848, kgo.ConsumeRegex(), kgo.ConsumeTopics(list),
		kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	sdk.Eventually(t, 60*time.Second, "the listed topics consumed", func() (bool, string) {
		got := m.byTopic()
		if errs := fmt.Sprint(m.Errors()); strings.Contains(errs, "INVALID_REGULAR_EXPRESSION") {
			t.Fatalf("the regex of 30 names refused: %.600s", errs)
		}
		return got[names[0]] == 3 && got[names[17]] == 3 && got[names[29]] == 3,
			fmt.Sprintf("polled %v, errors %v", got, m.Errors())
	})
	if n := m.byTopic()[outside]; n != 0 {
		t.Errorf("read %d records of %s, which the credential allows and the regex does not name", n, outside)
	}

	// The listener's topic list holds every topic now (it matched the list).
	if code, msg := regexJoin(rawAs(t, s, cred), group+"-raw", `x)|(?:.*`); code != kerr.InvalidRegularExpression.Code {
		t.Errorf("regex `x)|(?:.*`: error %d %.200q, want INVALID_REGULAR_EXPRESSION (it escaped the anchors and joined with every allowed topic)", code, msg)
	}
}
