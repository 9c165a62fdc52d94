package kafkaproto

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHalfClosedWatchedRequestsAnswered: a client that half-closes its
// connection (shutdown(SHUT_WR): it still reads) while a request waits
// on the coordinator — a first join of either protocol, an OffsetFetch,
// ListGroups and ConsumerGroupDescribe of 50 groups, the coordinator
// holding every call, request_timeout a minute — ends the coordinator
// call at once (an end of stream cannot be told from a close), yet is
// answered, retriable, as if the coordinator could not be reached: the
// join COORDINATOR_NOT_AVAILABLE, each OffsetFetch group
// COORDINATOR_LOAD_IN_PROGRESS, ListGroups and each described group
// COORDINATOR_NOT_AVAILABLE, no further group read; then the gateway
// closes the connection. So the listener treats a half-close as the HTTP
// side treats a half-closed long poll (gateway TestHalfClosedLongPollAnsweredEmpty).
// Before, the join was answered but the admin reads ended unanswered.
func TestHalfClosedWatchedRequestsAnswered(t *testing.T) {
	offsets := kmsg.NewPtrOffsetFetchRequest()
	offsets.SetVersion(8)
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	for i := range 50 {
		offsets.Groups = append(offsets.Groups, fetchGroup(fmt.Sprintf("g-%d", i)))
		describe.Groups = append(describe.Groups, fmt.Sprintf("g-%d", i))
	}
	requests := joinRequests()
	requests["OffsetFetch"], requests["ListGroups"], requests["ConsumerGroupDescribe"] = offsets, kmsg.NewPtrListGroupsRequest(), describe
	for name, req := range requests {
		t.Run(name, func(t *testing.T) {
			url, held, cancelled := heldJoins(t) // holds every call, not only joins
			cfg := testConfig()
			cfg.CoordinatorURL, cfg.RequestTimeout = url, time.Minute
			s := startGroupListener(t, cfg)
			r := dialAuthenticated(t, s, "credential")
			if err := r.send(req); err != nil {
				t.Fatal(err)
			}
			<-held
			if err := r.nc.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the coordinator call went on for 10 s after its client half-closed (request_timeout a minute)")
			}
			resp, err := r.receive(req)
			if err != nil {
				t.Fatalf("the half-closed client was not answered: %v", err)
			}
			want := kerr.CoordinatorNotAvailable.Code
			if name == "OffsetFetch" {
				want = kerr.CoordinatorLoadInProgress.Code
			}
			if codes := answerCodes(resp); len(codes) == 0 || !allEqual(codes, want) {
				t.Errorf("answered %v, want every code %d (retriable)", codes, want)
			}
			if !r.closed() {
				t.Error("the connection stayed open after the answer")
			}
			if n := len(held); n != 0 {
				t.Errorf("%d more coordinator calls after the half-close", n)
			}
		})
	}
}

// answerCodes are the error codes of a watched request's answer: the
// join's, ListGroups', or each group's.
func answerCodes(resp kmsg.Response) []int16 {
	switch r := resp.(type) {
	case *kmsg.OffsetFetchResponse:
		var out []int16
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
		return out
	case *kmsg.ConsumerGroupDescribeResponse:
		var out []int16
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
		return out
	case *kmsg.ListGroupsResponse:
		return []int16{r.ErrorCode}
	}
	return []int16{joinErrorCode(resp)}
}

func allEqual(codes []int16, want int16) bool {
	for _, c := range codes {
		if c != want {
			return false
		}
	}
	return true
}
