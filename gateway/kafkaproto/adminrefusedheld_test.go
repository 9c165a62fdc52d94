package kafkaproto

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/ocap"
)

// TestRefusedAdminAnswersAreBounded is redteam19 #1: a refused admin
// request echoes every entry it names with the refusal's message, ~200
// bytes an entry, so its answer was many times its body — a DeleteTopics
// v5 of 64 KiB naming ~65,000 empty topic names was answered 11 MB (172×),
// a DeleteGroups v3 7 MB, a DescribeConfigs v4 3 MB — and no admin
// request's answer asked for room among the answers held (answerRoom).
// One consume-only credential on kafka_max_connections_per_tenant (256)
// connections that read nothing held ~2.9 GB at the gateway, past
// max_answer_bytes_held (1 GiB), whose count then refused every other
// tenant's fetch answer 503 overloaded until write_timeout, again at each
// reconnection. Here one holder's connections, reading nothing, send the
// largest answers a refused request could make (as many entries as fit
// in refusedBodyMax, and as many long names as the entry bound lets):
// each is answered at most 512 KiB or its connection closed, the holder
// holds at most its cap and one answer more, and another holder still
// has room. Fails without the bound (an 11 MB answer; tens of MB held).
func TestRefusedAdminAnswersAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 2 * time.Minute // nothing is given back while the attack lasts
	const holderMax = 1 << 20
	gate := heldGate{held: answerheld.New(32<<20, holderMax)}
	s := startHeldListener(t, cfg, gate)

	manyEmpty := kmsg.NewPtrDeleteTopicsRequest() // v5: every name answered with the message
	manyEmpty.SetVersion(5)
	for len(manyEmpty.AppendTo(nil)) < refusedBodyMax-1024 {
		for range 1024 {
			manyEmpty.TopicNames = append(manyEmpty.TopicNames, "")
		}
	}
	fewLong := kmsg.NewPtrDeleteTopicsRequest() // names as long as the bounds let
	fewLong.SetVersion(5)
	for i := 0; len(fewLong.AppendTo(nil)) < refusedBodyMax-256 && len(fewLong.TopicNames) < 1000; i++ {
		fewLong.TopicNames = append(fewLong.TopicNames, strings.Repeat("t", 60))
	}
	const answerMax = 512 << 10
	var unread []*testConn
	for i := range 8 {
		c := dialAuthenticated(t, s, "credential")
		c.nc.(*net.TCPConn).SetReadBuffer(4096)
		req := manyEmpty
		if i%2 == 1 {
			req = fewLong
		}
		if err := c.send(req); err != nil {
			t.Fatal(err)
		}
		unread = append(unread, c)
	}
	for i, c := range unread {
		// The answer's size prefix, nothing more: the rest stays unread.
		c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		var size [4]byte
		_, err := io.ReadFull(c.nc, size[:])
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err):
			continue // closed unanswered: refused for its entries, or for the answers its holder holds
		case err != nil:
			t.Fatalf("connection %d: %v", i, err)
		}
		if n := binary.BigEndian.Uint32(size[:]); n > answerMax {
			t.Errorf("connection %d: a refused DeleteTopics of %d names answered %d bytes, want at most %d", i, len(unreadReq(i, manyEmpty, fewLong).TopicNames), n, answerMax)
		}
	}
	if held := gate.held.Held(); held > holderMax+answerMax {
		t.Errorf("one holder's unread refusals hold %d bytes of answers, want at most its cap %d and one answer more", held, holderMax)
	}
	if code := gate.AnswerRoom(&ocap.Claims{Subject: "another tenant"}); code != "" {
		t.Errorf("another holder has no room for its answers (%s): the gateway's 32 MiB are held", code)
	}

	// While the holder holds its cap of answers not yet read (its other
	// connections' answers in the sockets' way), a refused admin request
	// is closed unanswered; with room again, answered.
	small := kmsg.NewPtrDeleteGroupsRequest()
	small.SetVersion(3)
	small.Groups = []string{"g"}
	gate.held.Force("svc", holderMax)
	full := dialAuthenticated(t, s, "credential")
	if resp, err := full.roundTrip(small); err == nil {
		t.Errorf("a refused DeleteGroups while its holder holds its cap: answered %v, want the connection closed", resp)
	}
	gate.held.Give("svc", holderMax)
	resp, err := dialAuthenticated(t, s, "credential").roundTrip(small)
	if err != nil {
		t.Fatalf("a refused DeleteGroups with room: %v", err)
	}
	if g := resp.(*kmsg.DeleteGroupsResponse).Groups; len(g) != 1 || g[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("a refused DeleteGroups with room: %+v, want GROUP_AUTHORIZATION_FAILED", g)
	}
}

func unreadReq(i int, even, odd *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsRequest {
	if i%2 == 1 {
		return odd
	}
	return even
}

// isReset reports whether err is the peer resetting the connection (a
// close with unread data).
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// TestRefusedClusterRequestsCountTheirEntries: the 1,000-entry bound of a
// refused admin request covers the cluster APIs too (they were counted as
// one entry whatever they named): an ElectLeaders, a DescribeProducers
// and an AlterReplicaLogDirs naming 1,001 partitions, and a
// DescribeTransactions of 1,001 ids, are over it.
func TestRefusedClusterRequestsCountTheirEntries(t *testing.T) {
	parts := make([]int32, refusedEntriesMax)
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: parts}}
	producers := kmsg.NewPtrDescribeProducersRequest()
	producers.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: parts}}
	dirs := kmsg.NewPtrAlterReplicaLogDirsRequest()
	dirs.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: "/d", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: parts}}}}
	txns := kmsg.NewPtrDescribeTransactionsRequest()
	txns.TransactionalIDs = make([]string, refusedEntriesMax+1)
	for _, req := range []kmsg.Request{elect, producers, dirs, txns} {
		if n := refusedEntries(req); n <= refusedEntriesMax {
			t.Errorf("%s naming %d entries counted %d, want over %d", kmsg.NameForKey(req.Key()), refusedEntriesMax+1, n, refusedEntriesMax)
		}
	}
}
