package kafkaproto

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/ocap"
)

// The attacks of redteam3 items 2 and 3 on the listener's admin reads,
// sent by a kgo client (kmsg requests to the listener's broker, as the
// e2e admin tests send them) to a listener whose coordinator is an
// httptest server that counts what it is asked.

// adminCoordinator is a coordinator's tenant routes: every group has
// committed offsets for partitions 0..partitions-1 of "orders", and the
// list names groups with their states. hold makes /committed wait for
// its request to end.
type adminCoordinator struct {
	partitions int
	listed     []api.TenantGroup
	members    []api.TenantMember // every described group's
	hold       bool

	mu        sync.Mutex
	committed map[string]int // /committed calls by group
	described map[string]int // GET /v1/groups/{group} calls by group
	cancelled chan string    // a held call whose request ended
	arrived   chan string    // a held call arrived
}

func (a *adminCoordinator) start(t *testing.T) string {
	a.committed, a.described = map[string]int{}, map[string]int{}
	a.cancelled, a.arrived = make(chan string, 16), make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		path := r.URL.Path
		switch {
		case path == "/v1/groups":
			if a.hold {
				a.arrived <- path
				<-r.Context().Done()
				a.cancelled <- path
				return
			}
			json.NewEncoder(w).Encode(api.TenantGroupsResponse{Groups: a.listed})
		case strings.HasSuffix(path, "/committed"):
			group := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/groups/"), "/committed")
			if a.held(r, a.committed, group) {
				return
			}
			var out api.OffsetsResponse
			for p := range a.partitions {
				out.Offsets = append(out.Offsets, api.CommittedOffset{Topic: "orders", Partition: int32(p), Offset: int64(10 + p)})
			}
			json.NewEncoder(w).Encode(out)
		case strings.HasPrefix(path, "/v1/groups/") && !strings.Contains(strings.TrimPrefix(path, "/v1/groups/"), "/"):
			group := strings.TrimPrefix(path, "/v1/groups/")
			if a.held(r, a.described, group) {
				return
			}
			json.NewEncoder(w).Encode(api.TenantGroupDescription{Group: group, State: "Stable", Assignor: "sticky", Members: a.members})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// held counts a read of group in reads and, when the coordinator holds
// its calls, waits for r to end (reporting it arrived, then cancelled):
// true when it held r.
func (a *adminCoordinator) held(r *http.Request, reads map[string]int, group string) bool {
	a.mu.Lock()
	reads[group]++
	a.mu.Unlock()
	if !a.hold {
		return false
	}
	a.arrived <- group
	<-r.Context().Done()
	a.cancelled <- group
	return true
}

// calls is how many /committed calls the coordinator saw: in all, and
// for how many groups.
func (a *adminCoordinator) calls() (total, groups int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.committed {
		total += n
	}
	return total, len(a.committed)
}

// adminListener starts a listener on coordinator, its refusals logged
// to the returned observer, and a kgo client (PLAIN, a client credential
// for every group) to it; broker is the listener as kgo's seed broker.
func adminListener(t *testing.T, coordinator string, requestTimeout time.Duration) (*observer.ObservedLogs, *kgo.Broker) {
	logs, s := adminServer(t, coordinator, requestTimeout)
	return logs, kgoBroker(t, s)
}

// adminServer starts the listener of adminListener.
func adminServer(t *testing.T, coordinator string, requestTimeout time.Duration) (*observer.ObservedLogs, *Server) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	cfg := testConfig()
	cfg.CoordinatorURL, cfg.RequestTimeout, cfg.MaxRequestBytes = coordinator, requestTimeout, 8<<20
	s, err := New(cfg, clientGate{}, anyClient{}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, s, 10*time.Second) })
	return logs, s
}

// kgoBroker is a kgo client of s (with opts) as its seed broker.
func kgoBroker(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Broker {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(s.Addr()), kgo.SASL(plain.Auth{User: "u", Pass: "credential"}.AsMechanism()),
		kgo.RequestTimeoutOverhead(30 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// sendOffsetFetch sends groups (nil topics: all committed) as one OffsetFetch v8.
func sendOffsetFetch(t *testing.T, b *kgo.Broker, groups ...kmsg.OffsetFetchRequestGroup) *kmsg.OffsetFetchResponse {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	req.Groups = groups
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.OffsetFetchResponse)
}

func fetchGroup(name string) kmsg.OffsetFetchRequestGroup {
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = name
	return g
}

// answered counts a group's answered partitions, checking each offset.
func answered(t *testing.T, g kmsg.OffsetFetchResponseGroup) int {
	t.Helper()
	n := 0
	for _, tp := range g.Topics {
		for _, p := range tp.Partitions {
			if p.Offset != int64(10+p.Partition) {
				t.Fatalf("group %s %s/%d: offset %d, want %d", g.Group, tp.Topic, p.Partition, p.Offset, 10+p.Partition)
			}
			n++
		}
	}
	return n
}

// TestOffsetFetchGroupsBounded is redteam3 item 2: one OffsetFetch v8
// naming 250 groups with no member. The first 100 (DescribeGroups'
// bound) are answered from one coordinator call each; the rest answer
// INVALID_REQUEST, as DescribeGroups' do, without a coordinator call, and
// the refusal is logged (refusallog). Before, all 250 were read one after
// another and held.
func TestOffsetFetchGroupsBounded(t *testing.T) {
	a := &adminCoordinator{partitions: 4}
	logs, b := adminListener(t, a.start(t), 5*time.Second)
	var groups []kmsg.OffsetFetchRequestGroup
	for i := range 250 {
		groups = append(groups, fetchGroup(fmt.Sprintf("g-%03d", i)))
	}
	resp := sendOffsetFetch(t, b, groups...)
	if len(resp.Groups) != 250 {
		t.Fatalf("%d groups answered, want each of the 250 named", len(resp.Groups))
	}
	for i, g := range resp.Groups {
		switch {
		case g.Group != fmt.Sprintf("g-%03d", i):
			t.Fatalf("answer %d is group %q", i, g.Group)
		case i < offsetFetchGroupsMax && (g.ErrorCode != 0 || answered(t, g) != 4):
			t.Fatalf("group %s: error %d, %d partitions; want its 4 committed offsets", g.Group, g.ErrorCode, answered(t, g))
		case i >= offsetFetchGroupsMax && (g.ErrorCode != kerr.InvalidRequest.Code || len(g.Topics) != 0):
			t.Fatalf("group %s (beyond %d): error %d, %d topics; want INVALID_REQUEST and nothing else", g.Group, offsetFetchGroupsMax, g.ErrorCode, len(g.Topics))
		}
	}
	if total, distinct := a.calls(); total != offsetFetchGroupsMax || distinct != offsetFetchGroupsMax {
		t.Errorf("coordinator read %d times for %d groups, want once for each of the first %d", total, distinct, offsetFetchGroupsMax)
	}
	refused := logs.FilterMessage("kafka OffsetFetch refused").All()
	if len(refused) != 1 || refused[0].ContextMap()["groups_refused"] != int64(150) {
		t.Errorf("refusal lines %v, want one naming the 150 groups refused", refused)
	}
}

// TestOffsetFetchRepeatedGroupReadOnce: the probe's shape — one group
// named 100 times in one OffsetFetch — reads the group's committed
// offsets from the coordinator once, and answers each entry with them.
// Before, every entry was one coordinator call.
func TestOffsetFetchRepeatedGroupReadOnce(t *testing.T) {
	a := &adminCoordinator{partitions: 12}
	_, b := adminListener(t, a.start(t), 5*time.Second)
	var groups []kmsg.OffsetFetchRequestGroup
	for range offsetFetchGroupsMax {
		groups = append(groups, fetchGroup("rtg1"))
	}
	resp := sendOffsetFetch(t, b, groups...)
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 || answered(t, g) != 12 {
			t.Fatalf("rtg1: error %d, %d partitions; want its 12 committed offsets", g.ErrorCode, answered(t, g))
		}
	}
	if total, _ := a.calls(); total != 1 {
		t.Errorf("rtg1 named %d times: %d coordinator reads, want 1", offsetFetchGroupsMax, total)
	}
}

// TestOffsetFetchPartitionsBounded: an answer carries at most
// offsetFetchPartitionsMax partitions. Named partitions beyond it (one
// topic naming 200,000 partitions, duplicates, in the v8 and the v0–v7
// form) answer INVALID_REQUEST before any coordinator call; of groups
// read with all their topics, the one whose committed partitions no
// longer fit answers INVALID_REQUEST without them, the one before is
// answered whole. Before, every named partition was echoed and every
// group answered.
func TestOffsetFetchPartitionsBounded(t *testing.T) {
	a := &adminCoordinator{partitions: 6000}
	logs, s := adminServer(t, a.start(t), 5*time.Second)
	b := kgoBroker(t, s)

	named := fetchGroup("named")
	topic := kmsg.NewOffsetFetchRequestGroupTopic()
	topic.Topic, topic.Partitions = "orders", make([]int32, 200000)
	named.Topics = []kmsg.OffsetFetchRequestGroupTopic{topic}
	resp := sendOffsetFetch(t, b, named)
	if g := resp.Groups[0]; g.ErrorCode != kerr.InvalidRequest.Code || len(g.Topics) != 0 {
		t.Errorf("200,000 partitions named: error %d, %d topics; want INVALID_REQUEST and nothing echoed", g.ErrorCode, len(g.Topics))
	}
	v7 := kmsg.NewPtrOffsetFetchRequest()
	v7.SetVersion(7)
	v7.Group = "named"
	v7.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: make([]int32, 200000)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := kgoBroker(t, s, kgo.MaxVersions(kversion.V2_8_0())).Request(ctx, v7) // OffsetFetch v7: kgo sends the highest version it may
	if err != nil {
		t.Fatal(err)
	}
	if r := raw.(*kmsg.OffsetFetchResponse); r.ErrorCode != kerr.InvalidRequest.Code || len(r.Topics) != 0 {
		t.Errorf("v7, 200,000 partitions named: error %d, %d topics; want INVALID_REQUEST and nothing echoed", r.ErrorCode, len(r.Topics))
	}
	if total, _ := a.calls(); total != 0 {
		t.Errorf("%d coordinator reads for requests refused on their size, want none", total)
	}

	resp = sendOffsetFetch(t, b, fetchGroup("big-1"), fetchGroup("big-2"))
	if g := resp.Groups[0]; g.ErrorCode != 0 || answered(t, g) != 6000 {
		t.Errorf("big-1: error %d, %d partitions; want its 6000 committed offsets", g.ErrorCode, answered(t, g))
	}
	if g := resp.Groups[1]; g.ErrorCode != kerr.InvalidRequest.Code || len(g.Topics) != 0 {
		t.Errorf("big-2 (6000 more than the answer may carry): error %d, %d topics; want INVALID_REQUEST", g.ErrorCode, len(g.Topics))
	}
	if n := logs.FilterMessage("kafka OffsetFetch refused").Len(); n != 3 {
		t.Errorf("%d refusal lines, want one per refused request (3)", n)
	}

	// A group named with a few partitions is answered as before.
	few := fetchGroup("few")
	topic.Partitions = []int32{0, 1, 2}
	few.Topics = []kmsg.OffsetFetchRequestGroupTopic{topic}
	if g := sendOffsetFetch(t, b, few).Groups[0]; g.ErrorCode != 0 || answered(t, g) != 3 {
		t.Errorf("3 partitions named: error %d, %d answered; want the 3", g.ErrorCode, answered(t, g))
	}
}

// hangUpDuring sends req on a listener whose coordinator does not
// answer (request_timeout a minute) and hangs up once the coordinator
// was asked: the call must be cancelled within 10 s, and the listener
// then closes at once. It returns the coordinator.
func hangUpDuring(t *testing.T, req kmsg.Request) *adminCoordinator {
	t.Helper()
	a := &adminCoordinator{hold: true}
	cfg := testConfig()
	cfg.CoordinatorURL, cfg.RequestTimeout = a.start(t), time.Minute
	s := startGroupListener(t, cfg)
	r := dialAuthenticated(t, s, "credential")
	if err := r.send(req); err != nil {
		t.Fatal(err)
	}
	<-a.arrived
	r.nc.Close()
	select {
	case <-a.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator call of a client that hung up was not cancelled within 10 s")
	}
	closeWithin(t, s, 10*time.Second) // nothing more runs for it
	return a
}

// TestOffsetFetchEndsWhenTheClientLeaves: a client sends an OffsetFetch
// of 50 groups while the coordinator does not answer, then hangs up. The
// coordinator call in flight is cancelled at once and no further group
// is read. Before, each group waited request_timeout (here a minute)
// after the client was gone.
func TestOffsetFetchEndsWhenTheClientLeaves(t *testing.T) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	for i := range 50 {
		req.Groups = append(req.Groups, fetchGroup(fmt.Sprintf("g-%d", i)))
	}
	a := hangUpDuring(t, req)
	if total, _ := a.calls(); total != 1 {
		t.Errorf("%d coordinator reads, want only the one in flight when the client left", total)
	}
}

// TestListGroupsFiltersBounded is redteam3 item 3: a ListGroups v5 whose
// states and types filters have 5,000 entries each answers
// INVALID_REQUEST listing nothing, without asking the coordinator, and
// the refusal is logged; so does one entry over listGroupsFilterMax.
// Filters within the bound still match (case-insensitively, as Kafka).
// Before, each listed group was matched against every entry. With
// 1,000,000 entries each the request is refused before it is decoded
// (kafka_max_request_partitions): the connection closes.
func TestListGroupsFiltersBounded(t *testing.T) {
	a := &adminCoordinator{listed: []api.TenantGroup{{Group: "g-stable", State: "Stable"}, {Group: "g-empty", State: "Empty"}}}
	logs, b := adminListener(t, a.start(t), 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(states, types []string) *kmsg.ListGroupsResponse {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(5)
		req.StatesFilter, req.TypesFilter = states, types
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListGroupsResponse)
	}
	many := make([]string, 1000000)
	for i := range many {
		many[i] = "x"
	}
	// Past kafka_max_request_partitions entries (10,000) the request is
	// not even decoded: the connection closes (entries.go).
	req := kmsg.NewPtrListGroupsRequest()
	req.SetVersion(5)
	req.StatesFilter, req.TypesFilter = many, many
	if _, err := b.Request(ctx, req); err == nil {
		t.Error("1,000,000 states and types: answered, want the connection closed")
	}
	for name, f := range map[string][2][]string{
		"5,000 states and types": {many[:5000], append(many[:4999:4999], "consumer")},
		"17 states":              {append(many[:listGroupsFilterMax:listGroupsFilterMax], "Stable"), nil},
		"17 types":               {nil, append(many[:listGroupsFilterMax:listGroupsFilterMax], "consumer")},
	} {
		if resp := list(f[0], f[1]); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Groups) != 0 {
			t.Errorf("%s: error %d, %d groups; want INVALID_REQUEST listing nothing", name, resp.ErrorCode, len(resp.Groups))
		}
	}
	if n := logs.FilterMessage("kafka ListGroups refused").Len(); n != 3 {
		t.Errorf("%d refusal lines, want 3", n)
	}

	within := append(many[:listGroupsFilterMax-1:listGroupsFilterMax-1], "stable")
	resp := list(within, []string{"CONSUMER"})
	if resp.ErrorCode != 0 || len(resp.Groups) != 1 || resp.Groups[0].Group != "g-stable" {
		t.Errorf("16 states naming stable: %+v, want g-stable alone", resp)
	}
	if resp := list(nil, nil); resp.ErrorCode != 0 || len(resp.Groups) != 2 {
		t.Errorf("no filter: %+v, want both groups", resp)
	}
	// A capgate group is both consumer-protocol types: listed as the one
	// a filter names (kadm's DescribeGroups and DescribeConsumerGroups of
	// all groups each find it), consumer when it names both or none.
	for _, f := range []struct {
		types []string
		want  string
	}{{nil, "consumer"}, {[]string{"Classic"}, "classic"}, {[]string{"consumer"}, "consumer"}, {[]string{"classic", "consumer"}, "consumer"}, {[]string{"share"}, ""}} {
		resp := list(nil, f.types)
		if f.want == "" && len(resp.Groups) == 0 {
			continue
		}
		if resp.ErrorCode != 0 || len(resp.Groups) != 2 || resp.Groups[0].GroupType != f.want || resp.Groups[1].GroupType != f.want {
			t.Errorf("types %v: %+v, want both groups of type %q", f.types, resp, f.want)
		}
	}
}

// TestListGroupsEndsWhenTheClientLeaves: a ListGroups whose coordinator
// does not answer is cancelled as soon as its client hangs up. Before,
// the paging went on for request_timeout (here a minute).
func TestListGroupsEndsWhenTheClientLeaves(t *testing.T) {
	hangUpDuring(t, kmsg.NewPtrListGroupsRequest())
}

// TestDescribeAnswersBounded is redteam15 #3: DescribeGroups and
// ConsumerGroupDescribe bounded the groups they describe (100), not the
// bytes: a description is up to the coordinator's describe_bytes_max
// (4 MiB) of members, so one request naming a large group 100 times made
// the listener build a ~400 MB answer for one connection. Now an answer
// carries at most describeAnswerBytesMax of members (here 1 MiB; the
// group is ~420 KB): a group named ten times is described whole twice,
// and the other eight answer INVALID_REQUEST with the message. Fails
// without (ten whole descriptions).
func TestDescribeAnswersBounded(t *testing.T) {
	defer func(saved int) { describeAnswerBytesMax = saved }(describeAnswerBytesMax)
	describeAnswerBytesMax = 1 << 20
	member := api.TenantMember{MemberID: "m-1", ClientID: "c"}
	for i := range 2000 {
		member.Topics = append(member.Topics, fmt.Sprintf("%03d-%s", i, strings.Repeat("t", 200)))
	}
	a := &adminCoordinator{members: []api.TenantMember{member}}
	_, s := adminServer(t, a.start(t), 5*time.Second)
	s.topics.loaded, s.topics.maxAge, s.topics.topics = time.Now(), time.Hour, map[string]topicInfo{} // no Kafka here: ConsumerGroupDescribe's topic ids from the cache
	b := kgoBroker(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	describe := kmsg.NewPtrDescribeGroupsRequest()
	classic := kmsg.NewPtrConsumerGroupDescribeRequest()
	for range 10 {
		describe.Groups = append(describe.Groups, "big")
		classic.Groups = append(classic.Groups, "big")
	}
	raw, err := b.Request(ctx, describe)
	if err != nil {
		t.Fatal(err)
	}
	whole, cut := 0, 0
	for _, g := range raw.(*kmsg.DescribeGroupsResponse).Groups {
		switch {
		case g.ErrorCode == 0 && len(g.Members) == 1:
			whole++
		case g.ErrorCode == kerr.InvalidRequest.Code && len(g.Members) == 0:
			cut++
		default:
			t.Fatalf("DescribeGroups: group %s error %d with %d members", g.Group, g.ErrorCode, len(g.Members))
		}
	}
	if whole != 2 || cut != 8 {
		t.Errorf("DescribeGroups naming a ~420 KB group 10 times, 1 MiB an answer: %d described, %d cut; want 2 and 8", whole, cut)
	}

	raw, err = b.Request(ctx, classic)
	if err != nil {
		t.Fatal(err)
	}
	whole, cut = 0, 0
	for _, g := range raw.(*kmsg.ConsumerGroupDescribeResponse).Groups {
		switch {
		case g.ErrorCode == 0 && len(g.Members) == 1:
			whole++
		case g.ErrorCode == kerr.InvalidRequest.Code && len(g.Members) == 0 && g.ErrorMessage != nil && *g.ErrorMessage == describeCut:
			cut++
		default:
			t.Fatalf("ConsumerGroupDescribe: group %s error %d with %d members", g.Group, g.ErrorCode, len(g.Members))
		}
	}
	if whole != 2 || cut != 8 {
		t.Errorf("ConsumerGroupDescribe naming a ~420 KB group 10 times, 1 MiB an answer: %d described, %d cut; want 2 and 8", whole, cut)
	}
}

// heldGate is clientGate whose answers held are counted for real
// (internal/answerheld), per principal subject.
type heldGate struct {
	clientGate
	held *answerheld.Counter
}

func (g heldGate) HoldAnswer(c *ocap.Claims, n int) func() {
	g.held.Force(c.Subject, int64(n))
	return func() { g.held.Give(c.Subject, int64(n)) }
}

func (g heldGate) AnswerRoom(c *ocap.Claims) api.Code {
	if g.held.Full(c.Subject) != answerheld.None {
		return api.CodeTooManyFetches
	}
	return ""
}

// startHeldListener starts a listener of cfg whose answers held are
// counted by gate, its principals anyClient's.
func startHeldListener(t *testing.T, cfg Config, gate heldGate) *Server {
	t.Helper()
	s, err := New(cfg, gate, anyClient{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, s, 10*time.Second) })
	return s
}

// TestSlowAdminReadersHoldBoundedAnswers is redteam15 #1 at the Kafka
// listener: an admin read's answer (DescribeGroups, ListGroups, an
// OffsetFetch without a member) stays in the gateway until its reader
// takes it, up to write_timeout, and nothing but the coordinator's rate
// bounded how many a tenant's slow connections held. Now every answer of
// 16 KiB or more is counted with the holder's fetch answers until
// written, and an admin read asked while the holder holds its cap
// answers COORDINATOR_NOT_AVAILABLE (throttled) without asking the
// coordinator: here a DescribeGroups of a ~16 MB answer left unread holds
// the holder's 1 MiB, its next describe on another connection is
// refused unread, and once the reader goes it is described again. Fails
// without (the second describe answered).
func TestSlowAdminReadersHoldBoundedAnswers(t *testing.T) {
	member := api.TenantMember{MemberID: "m-1", ClientID: "c"}
	for i := range 2000 {
		member.Topics = append(member.Topics, fmt.Sprintf("%03d-%s", i, strings.Repeat("t", 200)))
	}
	a := &adminCoordinator{members: []api.TenantMember{member}}
	cfg := testConfig()
	cfg.CoordinatorURL, cfg.MaxRequestBytes, cfg.WriteTimeout = a.start(t), 8<<20, 2*time.Minute
	gate := heldGate{held: answerheld.New(1<<30, 1<<20)}
	s := startHeldListener(t, cfg, gate)

	unread := dialAuthenticated(t, s, "credential")
	unread.nc.(*net.TCPConn).SetReadBuffer(4096)
	large := kmsg.NewPtrDescribeGroupsRequest()
	for range 38 { // ~16 MB: past what the sockets buffer
		large.Groups = append(large.Groups, "big")
	}
	if err := unread.send(large); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for gate.held.Held() < 1<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the unread answer: %d bytes held, want it counted", gate.held.Held())
		}
		time.Sleep(10 * time.Millisecond) // polling the listener, not waiting for an event
	}
	a.mu.Lock()
	reads := a.described["big"]
	a.mu.Unlock()

	b := kgoBroker(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"big"}
	raw, err := b.Request(ctx, describe)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.DescribeGroupsResponse)
	if g := resp.Groups[0]; g.ErrorCode != kerr.CoordinatorNotAvailable.Code || len(g.Members) != 0 || resp.ThrottleMillis == 0 {
		t.Fatalf("a describe while the holder's answer is unread: error %d, %d members, throttle %d ms; want COORDINATOR_NOT_AVAILABLE, throttled",
			g.ErrorCode, len(g.Members), resp.ThrottleMillis)
	}
	a.mu.Lock()
	after := a.described["big"]
	a.mu.Unlock()
	if after != reads {
		t.Errorf("the refused describe asked the coordinator (%d reads, %d before)", after, reads)
	}

	unread.nc.Close()
	for gate.held.Held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the reader gone: %d bytes still held", gate.held.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if raw, err = b.Request(ctx, describe); err != nil {
		t.Fatal(err)
	}
	if g := raw.(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("a describe once nothing is held: error %d, %d members", g.ErrorCode, len(g.Members))
	}
}
