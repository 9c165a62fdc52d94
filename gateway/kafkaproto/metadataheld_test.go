package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/ocap"
)

// TestUnreadMetadataAnswersAreBounded is redteam19's recommendation 1: a
// Metadata of every topic (a request of ~20 bytes) is answered with every
// partition the credential sees, ~26 bytes each, and such answers were
// counted among the answers held but never asked for room: on a fleet of
// ~100,000 partitions a tenant's 256 unread connections held ~770 MB, and
// past max_answer_bytes_held every tenant's fetch answers were refused
// 503 overloaded. Here the listener's topic list is 50,000 partitions
// (~1.3 MB an answer); one holder's 8 connections ask for all of it and
// read nothing: its first answer is held (past its 1 MiB cap), the next
// ones close unanswered, and another holder still has room among the
// gateway's 8 MiB; a small Metadata (one named topic) is still answered.
// Fails without (8 answers held, ~10 MB, and the other holder refused).
func TestUnreadMetadataAnswersAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 2 * time.Minute // nothing is given back while the attack lasts
	cfg.SendBufferBytes = 64 << 10     // the default's order: the kernel takes no answer whole
	const holderMax = 1 << 20
	gate := heldGate{held: answerheld.New(8<<20, holderMax)}
	s := startHeldListener(t, cfg, gate)
	topics := map[string]topicInfo{}
	for i := range 20 {
		topics[fmt.Sprintf("topic-%02d", i)] = topicInfo{id: [16]byte{byte(i + 1)}, partitions: 2500}
	}
	topics["small"] = topicInfo{id: [16]byte{99}, partitions: 8}
	s.topics.mu.Lock()
	// Loaded "in the future": the list is never older than a Metadata's
	// refresh age, so the listener (built without a broker) never reloads it.
	s.topics.topics, s.topics.byID, s.topics.loaded = topics, map[[16]byte]string{}, time.Now().Add(time.Hour)
	s.topics.mu.Unlock()

	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(12)
	answered, largest := 0, uint32(0)
	for i := range 8 {
		c := dialAuthenticated(t, s, "credential")
		c.nc.(*net.TCPConn).SetReadBuffer(4096)
		if err := c.send(all); err != nil {
			t.Fatal(err)
		}
		// The answer's size prefix, nothing more: the rest stays unread.
		c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		var size [4]byte
		_, err := io.ReadFull(c.nc, size[:])
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err):
			continue // closed unanswered: its holder had no room
		case err != nil:
			t.Fatalf("connection %d: %v", i, err)
		}
		answered++
		largest = max(largest, binary.BigEndian.Uint32(size[:]))
	}
	if largest < holdMin {
		t.Fatalf("a Metadata of 50,000 partitions answered %d bytes: the test needs answers past holdMin", largest)
	}
	if held := gate.held.Held(); held > holderMax+int64(largest) {
		t.Errorf("one holder's 8 unread Metadata answers (%d answered) hold %d bytes, want at most its cap %d and one answer (%d) more", answered, held, holderMax, largest)
	}
	if code := gate.AnswerRoom(&ocap.Claims{Subject: "another tenant"}); code != "" {
		t.Errorf("another holder has no room for its answers (%s): one holder's unread Metadata answers hold the gateway's 8 MiB", code)
	}
	one := kmsg.NewPtrMetadataRequest()
	one.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("small")
	one.Topics = append(one.Topics, rt)
	resp, err := dialAuthenticated(t, s, "credential").roundTrip(one)
	if err != nil {
		t.Fatalf("a Metadata of one topic while its holder holds its cap: %v", err)
	}
	if ts := resp.(*kmsg.MetadataResponse).Topics; len(ts) != 1 || len(ts[0].Partitions) != 8 {
		t.Errorf("a Metadata of one topic while its holder holds its cap: %d topics, want small's 8 partitions", len(ts))
	}
}
