package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/e2e/sdk"
)

// Compatibility of the Kafka listener with what a Kafka user does beside
// consuming: offsets looked up by time, and a regex consumer that takes a
// topic created while it consumes.

// TestListOffsetsByTimestamp: kadm's offsets by time (ListOffsets with a
// timestamp), the start, the end and the max timestamp (-3, v7) through
// the listener answer what Kafka answers straight.
func TestListOffsetsByTimestamp(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	direct := directClient(t, s)
	producer, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range 10 { // partition 0: a record a second from base; partition 1: none
		r := &kgo.Record{Topic: s.Topic, Partition: 0, Value: []byte("x"), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cred := s.ClientCredential(t, "times")
	through := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), cred, false))
	straight := kadm.NewClient(direct)
	type lookup struct {
		name string
		list func(*kadm.Client) (kadm.ListedOffsets, error)
	}
	lookups := []lookup{
		{"start", func(a *kadm.Client) (kadm.ListedOffsets, error) { return a.ListStartOffsets(ctx, s.Topic) }},
		{"end", func(a *kadm.Client) (kadm.ListedOffsets, error) { return a.ListEndOffsets(ctx, s.Topic) }},
		{"max timestamp", func(a *kadm.Client) (kadm.ListedOffsets, error) { return a.ListMaxTimestampOffsets(ctx, s.Topic) }},
	}
	for _, ms := range []time.Duration{0, 3500 * time.Millisecond, 9 * time.Second, time.Minute} {
		at := base.Add(ms).UnixMilli()
		lookups = append(lookups, lookup{fmt.Sprintf("after %v", ms), func(a *kadm.Client) (kadm.ListedOffsets, error) {
			return a.ListOffsetsAfterMilli(ctx, at, s.Topic)
		}})
	}
	for _, l := range lookups {
		want, err := l.list(straight)
		if err != nil {
			t.Fatalf("%s straight from Kafka: %v", l.name, err)
		}
		got, err := l.list(through)
		if err != nil {
			t.Fatalf("%s through the listener: %v", l.name, err)
		}
		for p := range int32(2) {
			w, _ := want.Lookup(s.Topic, p)
			g, ok := got.Lookup(s.Topic, p)
			if !ok || g.Err != nil || g.Offset != w.Offset || g.Timestamp != w.Timestamp {
				t.Errorf("%s of partition %d through the listener: offset %d timestamp %d (err %v), Kafka's offset %d timestamp %d",
					l.name, p, g.Offset, g.Timestamp, g.Err, w.Offset, w.Timestamp)
			}
		}
	}
	l, err := through.ListOffsetsAfterMilli(ctx, base.Add(3500*time.Millisecond).UnixMilli(), s.Topic)
	if o, _ := l.Lookup(s.Topic, 0); err != nil || o.Err != nil || o.Offset != 4 {
		t.Errorf("the first offset at or after base+3.5s: %+v (%v), want 4", o, err)
	}
}

// TestKgoRegexConsumerTakesACreatedTopic: a kgo consumer of a pattern
// (ConsumeRegex; KIP-848: the listener matches SubscribedTopicRegex
// itself, as the credential allows only "orders" and "orders-*";
// classic: kgo matches its metadata and rejoins with the new topic) whose
// credential allows only some of what the regex matches reads the
// allowed topics, takes an allowed topic created in Kafka while it
// consumes, and never reads a matching topic its credential does not
// allow. Before, the KIP-848 join was refused GROUP_AUTHORIZATION_FAILED
// ("topic_pattern needs a credential for any topic"), retried by kgo for
// ever: nothing read.
func TestKgoRegexConsumerTakesACreatedTopic(t *testing.T) {
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		t.Run(proto.String(), func(t *testing.T) {
			s := Start(t, Options{Partitions: 2})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			group := "regex-" + proto.String()
			cred, err := s.Stack.ClientCredential(ctx, "regex", []string{group}, []string{"orders", "orders-*"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			admin := kadm.NewClient(directClient(t, s))
			if created, err := admin.CreateTopics(ctx, 1, 1, nil, "ordinals"); err != nil || created.Error() != nil {
				t.Fatal(err, created.Error())
			}
			produceDirect(t, s, "orders", 0, 3)
			produceDirect(t, s, "ordinals", 0, 3) // matches ^ord.*, not allowed
			m := joinGroup(t, s, "regex1", group, cred, proto, kgo.ConsumeRegex(), kgo.ConsumeTopics("^ord.*"),
				kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(250*time.Millisecond))
			sdk.Eventually(t, 60*time.Second, "orders consumed", func() (bool, string) {
				return m.byTopic()["orders"] == 3, fmt.Sprintf("polled %v, errors %v", m.byTopic(), m.Errors())
			})
			topic := "orders-" + proto.String()
			created, err := admin.CreateTopics(ctx, 2, 1, nil, topic)
			if err == nil {
				err = created.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now()
			produceDirect(t, s, topic, 0, 3)
			produceDirect(t, s, topic, 1, 3)
			sdk.Eventually(t, 90*time.Second, "the created topic consumed", func() (bool, string) {
				return m.byTopic()[topic] == 6, fmt.Sprintf("polled %v, errors %v", m.byTopic(), m.Errors())
			})
			t.Logf("%s: the topic created while consuming read %v after its creation", proto, time.Since(at).Round(10*time.Millisecond))
			if n := m.byTopic()["ordinals"]; n != 0 {
				t.Errorf("read %d records of ordinals, which the regex matches and the credential does not allow", n)
			}
			if errs := m.Errors(); len(errs) > 0 {
				t.Logf("errors the consumer saw: %v", errs)
			}
		})
	}
}

// TestGroupOfFourSurvivesAKill: three members — unmodified KafkaJS
// (classic eager), kgo KIP-848 or kgo classic cooperative-sticky, each a
// process of its own — read a topic of 8 partitions through the listener
// while a producer writes; a fourth joins (3 → 4); kadm describes the
// group through the listener (4 members, each with its partitions); one
// member's process is killed (SIGKILL: no leave, no commit) and its
// partitions reach the others once its session timeout passed (KafkaJS
// 6 s, kgo classic 2 s, KIP-848 the listener's 10 s); every record is
// read. Then the three left stop (SIGTERM: commit and leave) and a new
// member resumes from the offsets committed: kadm's OffsetFetch through
// the listener names them, and the new member's first record of each
// partition is the committed offset. It logs how long each step took
// and how many records were read twice: KafkaJS commits after each batch
// (none twice as a rule); kgoconsumer autocommits every 100 ms and not on
// revoke, so a moved partition's last ~100 ms are read again, and a
// member stopped within 100 ms of reading leaves its offset behind
// (measured: 3 → 4 joins settle in 2 s with KafkaJS, 0.1–0.3 s with kgo;
// a killed member's partitions move after 6.5 s, 10 s and 2 s).
func TestGroupOfFourSurvivesAKill(t *testing.T) {
	type client struct {
		name     string
		start    func(t *testing.T, s *Stack, name, group, cred string) *consumerProc
		assigned func(*consumerProc) []int32
	}
	kgoProc := func(protocol string) func(t *testing.T, s *Stack, name, group, cred string) *consumerProc {
		return func(t *testing.T, s *Stack, name, group, cred string) *consumerProc {
			return startConsumerProc(t, s, name, group, cred, protocol)
		}
	}
	kgoAssigned := func(p *consumerProc) []int32 {
		var out []int32
		for part := range p.assigned() {
			out = append(out, part)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []client{
		{"kafkajs", func(t *testing.T, s *Stack, name, group, cred string) *consumerProc {
			return startKafkaJS(t, s, name, group, cred)
		}, lastAssigned},
		{"kgo-kip848", kgoProc("kip848"), kgoAssigned},
		{"kgo-cooperative", kgoProc("cooperative"), kgoAssigned},
	} {
		t.Run(c.name, func(t *testing.T) { groupSurvivesAKill(t, c.start, c.assigned) })
	}
}

// committedOnce reports whether any of procs printed a commit of
// partition p that the listener accepted (kgoconsumer: one event per
// partition, Err empty; KafkaJS: the commit event's partitions).
func committedOnce(procs map[string]*consumerProc, p int32) bool {
	for _, pr := range procs {
		pr.mu.Lock()
		found := slices.ContainsFunc(pr.events, func(e event) bool {
			if e.Ev != "commit" || e.Err != "" {
				return false
			}
			if len(e.Partitions) > 0 {
				return slices.Contains(e.Partitions, p)
			}
			return e.Partition == p
		})
		pr.mu.Unlock()
		if found {
			return true
		}
	}
	return false
}

func groupSurvivesAKill(t *testing.T, start func(t *testing.T, s *Stack, name, group, cred string) *consumerProc, assignedTo func(*consumerProc) []int32) {
	const parts = 8
	s := Start(t, Options{Partitions: parts})
	group := "kill-" + strings.ToLower(strings.Split(t.Name(), "/")[1])
	cred := s.ClientCredential(t, group)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prod := startProducer(t, s, 50*time.Millisecond)
	procs := map[string]*consumerProc{}
	live := []string{"js1", "js2", "js3"}
	for _, name := range live {
		procs[name] = start(t, s, name, group, cred)
	}
	// covered: the live members' assignments are disjoint, cover every
	// partition, and each member read since at.
	covered := func(at time.Time) (bool, string) {
		if ok, why := settled(t, s, group, len(live)); !ok {
			return false, why
		}
		seen := map[int32]string{}
		for _, name := range live {
			if !readSince(procs, []string{name}, -1, at) {
				return false, name + " read nothing yet"
			}
			for _, p := range assignedTo(procs[name]) {
				if other, dup := seen[p]; dup {
					return false, fmt.Sprintf("partition %d assigned to %s and %s", p, other, name)
				}
				seen[p] = name
			}
		}
		return len(seen) == parts, fmt.Sprintf("%d of %d partitions assigned", len(seen), parts)
	}
	began := time.Now()
	sdk.Eventually(t, 90*time.Second, "3 members reading every partition", func() (bool, string) { return covered(began) })
	t.Logf("3 members settled and reading %v after start", time.Since(began).Round(10*time.Millisecond))

	at := time.Now()
	procs["js4"] = start(t, s, "js4", group, cred)
	live = append(live, "js4")
	sdk.Eventually(t, 90*time.Second, "4 members reading every partition", func() (bool, string) { return covered(at) })
	t.Logf("3 → 4 members: settled and reading %v after the fourth started", time.Since(at).Round(10*time.Millisecond))

	adm := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), cred, false))
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := described[group]
	var owned []int32
	for _, m := range d.Members {
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range a.Topics {
				owned = append(owned, tp.Partitions...)
			}
		}
	}
	slices.Sort(owned)
	if d.Err != nil || len(d.Members) != 4 || len(owned) != parts || len(slices.Compact(owned)) != parts {
		t.Errorf("kadm described %s: error %v, state %q, %d members owning %v; want 4 members owning the %d partitions once each",
			group, d.Err, d.State, len(d.Members), owned, parts)
	}

	killed := procs["js2"]
	held := assignedTo(killed)
	at = time.Now()
	killed.signal(t, syscall.SIGKILL)
	live = slices.DeleteFunc(live, func(n string) bool { return n == "js2" })
	sdk.Eventually(t, 90*time.Second, "the killed member's partitions read by the others", func() (bool, string) {
		if ok, why := covered(at); !ok {
			return false, why
		}
		for _, p := range held {
			if !readSince(procs, live, p, at) {
				return false, fmt.Sprintf("partition %d (the killed member's) not read since", p)
			}
		}
		return true, ""
	})
	t.Logf("kill -9 of a member owning %v: its partitions read by the others %v after", held, time.Since(at).Round(10*time.Millisecond))

	prod.Stop()
	want := prod.produced()
	allRead(t, 60*time.Second, procs, want)
	twice, twiceElsewhere := 0, 0
	for p, offs := range polled(procs) {
		for _, who := range offs {
			if len(who) > 1 {
				twice += len(who) - 1
				if !slices.Contains(held, p) {
					twiceElsewhere += len(who) - 1
				}
			}
		}
	}
	t.Logf("%d records produced; %d read twice (%d outside the killed member's partitions)", sum(want), twice, twiceElsewhere)
	// A partition whose last owner held it for less than an autocommit
	// interval before the stop has no commit yet (kgoconsumer autocommits
	// every 100 ms and not on revoke): the KIP-848 variant moves the
	// killed member's partitions 10 s on, and the stop came 28 ms after a
	// survivor took one — nothing committed for it, and the OffsetFetch
	// below rightly named no offset. The members stop once every
	// partition has a commit the listener accepted.
	sdk.Eventually(t, 30*time.Second, "every partition's offset committed", func() (bool, string) {
		for p := range int32(parts) {
			if !committedOnce(procs, p) {
				return false, fmt.Sprintf("no commit of partition %d accepted yet", p)
			}
		}
		return true, ""
	})

	for _, name := range live {
		procs[name].signal(t, syscall.SIGTERM)
	}
	for _, name := range live {
		select {
		case <-procs[name].done:
		case <-ctx.Done():
			t.Fatalf("%s did not stop on SIGTERM", name)
		}
	}
	var committed kadm.OffsetResponses
	sdk.Eventually(t, 30*time.Second, "the group's offsets fetched through the listener", func() (bool, string) {
		committed, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = committed.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	from := map[int32]int64{}
	for p := range int32(parts) {
		o, ok := committed.Lookup(s.Topic, p)
		if !ok || o.At < 0 || o.At > want[p] {
			t.Fatalf("partition %d: committed %+v (found %v), want an offset within [0, %d]", p, o, ok, want[p])
		}
		from[p] = o.At
	}
	t.Logf("offsets committed after the members stopped: %v (produced %v)", from, want)
	for p := range int32(parts) {
		produceDirect(t, s, s.Topic, p, 3)
	}
	after := start(t, s, "js5", group, cred)
	sdk.Eventually(t, 90*time.Second, "a new member reads on from the committed offsets", func() (bool, string) {
		first, n := map[int32]int64{}, map[int32]int64{}
		for _, e := range after.Events() {
			if e.Ev == "record" {
				if _, ok := first[e.Partition]; !ok {
					first[e.Partition] = e.Offset
				}
				n[e.Partition]++
			}
		}
		for p := range int32(parts) {
			if f, ok := first[p]; ok && f != from[p] {
				t.Fatalf("partition %d: the new member read first offset %d, committed %d", p, f, from[p])
			}
			if n[p] < want[p]-from[p]+3 {
				return false, fmt.Sprintf("partition %d: %d read, want %d", p, n[p], want[p]-from[p]+3)
			}
		}
		return true, ""
	})
	for name, p := range procs {
		for _, e := range p.Events() {
			if e.Ev == "crash" {
				t.Errorf("%s crashed: %s", name, e.Err)
			}
		}
	}
}

// lastAssigned is a KafkaJS member's last assignment (GROUP_JOIN).
func lastAssigned(p *consumerProc) []int32 {
	var last []int32
	for _, e := range p.Events() {
		if e.Ev == "assigned" {
			last = e.Partitions
		}
	}
	return last
}

// readSince reports whether one of names read partition p (any, -1)
// after at.
func readSince(procs map[string]*consumerProc, names []string, p int32, at time.Time) bool {
	for _, name := range names {
		for _, e := range procs[name].Events() {
			if e.Ev == "record" && (p < 0 || e.Partition == p) && e.time().After(at) {
				return true
			}
		}
	}
	return false
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestRegexMatchingNoAllowedTopicJoinsOnceCreated: a KIP-848 heartbeat
// whose regex matches no topic its credential allows (only a topic it
// does not: "ordinals") is answered UNKNOWN_TOPIC_OR_PARTITION with a
// message naming the regex and what the credential allows (retriable),
// and the gateway logs it at warn; an invalid regex is
// INVALID_REGULAR_EXPRESSION. (kgo itself joins only once its metadata
// shows a matching topic it may see.) Once an allowed matching topic is
// created, a kgo consumer of the regex joins and reads it — and never
// the other.
func TestRegexMatchingNoAllowedTopicJoinsOnceCreated(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 1, Observe: core})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "regex-none"
	cred, err := s.Stack.ClientCredential(ctx, "regex", []string{group}, []string{"orders-*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	admin := kadm.NewClient(directClient(t, s))
	if created, err := admin.CreateTopics(ctx, 1, 1, nil, "ordinals"); err != nil || created.Error() != nil {
		t.Fatal(err, created.Error())
	}
	produceDirect(t, s, "ordinals", 0, 3)

	r := dialRaw(t, s.KafkaAddrs()[0])
	r.authenticate("OAUTHBEARER", cred)
	heartbeat := func(regex string) (int16, string) { return regexJoin(r, group, regex) }
	if code, msg := heartbeat("^ord.*"); code != kerr.UnknownTopicOrPartition.Code || !strings.Contains(msg, `"^ord.*"`) || !strings.Contains(msg, "orders-*") {
		t.Errorf("a regex matching no allowed topic: error %d %q, want UNKNOWN_TOPIC_OR_PARTITION naming the regex and orders-*", code, msg)
	}
	said := false
	for _, e := range logs.FilterMessageSnippet("topic regex matches no topic its credential allows").All() {
		f := e.ContextMap()
		said = said || f["group"] == group && f["topic_regex"] == "^ord.*" && fmt.Sprint(f["credential_topics"]) == "[orders-*]"
	}
	if !said {
		t.Errorf("the regex matching no allowed topic not logged (%d warnings)", logs.Len())
	}
	if code, msg := heartbeat("orders-("); code != kerr.InvalidRegularExpression.Code {
		t.Errorf("an invalid regex: error %d %q, want INVALID_REGULAR_EXPRESSION", code, msg)
	}

	m := joinGroup(t, s, "regex1", group, cred, kip848, kgo.ConsumeRegex(), kgo.ConsumeTopics("^ord.*"),
		kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if created, err := admin.CreateTopics(ctx, 1, 1, nil, "orders-late"); err != nil || created.Error() != nil {
		t.Fatal(err, created.Error())
	}
	produceDirect(t, s, "orders-late", 0, 3)
	sdk.Eventually(t, 90*time.Second, "the allowed topic created later consumed", func() (bool, string) {
		return m.byTopic()["orders-late"] == 3, fmt.Sprintf("polled %v, errors %v", m.byTopic(), m.Errors())
	})
	if n := m.byTopic()["ordinals"]; n != 0 {
		t.Errorf("read %d records of ordinals, which the credential does not allow", n)
	}
}
