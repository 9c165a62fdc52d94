package kafkaproto

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRefusedAnswersAreNotAmplified: a refused admin request's answer
// echoes every entry it names, with its error code — but the message
// rides on the first refusedMessagesMax entries alone. With it on every
// entry, 64 KiB of one-byte topic names (DeleteTopics v5) was answered
// with ~7 MB (30,000 × a 150-byte message), and an ElectLeaders of
// 15,000 partitions with ~2.6 MB: a hundredfold of the request, held
// for a client that need not read it. The answer stays within a small
// multiple of the request, the first entries say why, every entry is
// refused.
func TestRefusedAnswersAreNotAmplified(t *testing.T) {
	deleteTopics := kmsg.NewPtrDeleteTopicsRequest()
	deleteTopics.SetVersion(5)
	for i := range 20_000 {
		deleteTopics.TopicNames = append(deleteTopics.TopicNames, fmt.Sprintf("%c", 'a'+i%26))
	}
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.SetVersion(2)
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic = "orders"
	for p := range int32(15_000) {
		et.Partitions = append(et.Partitions, p)
	}
	elect.Topics = append(elect.Topics, et)
	scram := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for range 20_000 {
		scram.Users = append(scram.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: "u"})
	}
	for _, tc := range []struct {
		req      kmsg.Request
		messages func(kmsg.Response) (refused, withMessage int)
	}{
		{deleteTopics, func(r kmsg.Response) (int, int) {
			return countRefused(r.(*kmsg.DeleteTopicsResponse).Topics, func(t kmsg.DeleteTopicsResponseTopic) (int16, *string) { return t.ErrorCode, t.ErrorMessage })
		}},
		{elect, func(r kmsg.Response) (int, int) {
			return countRefused(r.(*kmsg.ElectLeadersResponse).Topics[0].Partitions, func(p kmsg.ElectLeadersResponseTopicPartition) (int16, *string) { return p.ErrorCode, p.ErrorMessage })
		}},
		{scram, func(r kmsg.Response) (int, int) {
			return countRefused(r.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results, func(u kmsg.DescribeUserSCRAMCredentialsResponseResult) (int16, *string) {
				return u.ErrorCode, u.ErrorMessage
			})
		}},
	} {
		name := kmsg.NameForKey(tc.req.Key())
		body := tc.req.AppendTo(nil)
		if len(body) > refusedBodyMax {
			t.Fatalf("%s: %d bytes, past refusedBodyMax: the test's request would not be decoded", name, len(body))
		}
		resp, _, _ := refuseAdmin(tc.req)
		answer := resp.AppendTo(nil)
		refused, withMessage := tc.messages(resp)
		switch {
		case len(answer) > 4*len(body)+16<<10:
			t.Errorf("%s of %d bytes answered with %d bytes (%d entries carry the message)", name, len(body), len(answer), withMessage)
		case withMessage < 1 || withMessage > refusedMessagesMax:
			t.Errorf("%s: %d entries carry the message, want 1 to %d", name, withMessage, refusedMessagesMax)
		case refused < 15_000:
			t.Errorf("%s: %d entries refused, want every one named", name, refused)
		}
	}
}

// countRefused counts the entries answered with an error, and those of
// them with a message.
func countRefused[E any](entries []E, read func(E) (int16, *string)) (refused, withMessage int) {
	for _, e := range entries {
		code, msg := read(e)
		if code != 0 {
			refused++
		}
		if msg != nil && *msg != "" {
			withMessage++
		}
	}
	return refused, withMessage
}
