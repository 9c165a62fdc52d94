package kafkaclients

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/gateway"
)

// TestRefusedAdminRequestsStallNoOtherTenant is redteam19 #1 on the real
// stack: tenant A, with a consume-only credential for its own groups,
// sends refused DeleteTopics v5 requests of 64 KiB (~65,000 empty names)
// on three connections of the Kafka listener and reads none of the
// answers. Each answer was 11 MB, counted among the gateway's answers
// held, and three of them filled its max_answer_bytes_held (16 MiB here,
// 1 GiB by default against 256 connections of one tenant): tenant B's
// HTTP fetch of a 64 KiB record, with its own capability, was refused
// 503 overloaded until A's write_timeout. Now each of A's requests is
// closed unanswered (over refusedEntriesMax) and B's fetch is served.
func TestRefusedAdminRequestsStallNoOtherTenant(t *testing.T) {
	s := Start(t, Options{Partitions: 1, Gateway: func(c *gateway.Config) {
		c.MaxAnswerBytesHeld, c.MaxAnswerBytesHeldPerHolder = 16<<20, 16<<20
		c.WriteTimeout = time.Minute // A's answers stay held the whole test
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	record := &kgo.Record{Topic: s.Topic, Partition: 0, Value: []byte(strings.Repeat("v", 64<<10))}
	if err := directClient(t, s).ProduceSync(ctx, record).FirstErr(); err != nil {
		t.Fatal(err)
	}
	grant := s.Grant(t, s.Topic, 0, []string{"fetch"}, time.Minute)
	fetchB := func() (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.GatewayURLs()[0]+"/v1/topics/"+s.Topic+"/partitions/0/records?offset=0&max_wait_ms=0", nil)
		req.Header.Set("Authorization", "Bearer "+grant.Capability)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body[:min(len(body), 200)])
	}
	if status, body := fetchB(); status != http.StatusOK {
		t.Fatalf("B's fetch before the attack: %d %s", status, body)
	}

	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	flood := kmsg.NewPtrDeleteTopicsRequest()
	flood.SetVersion(5)
	for len(flood.TopicNames) < 65000 {
		flood.TopicNames = append(flood.TopicNames, "")
	}
	var held int
	for range 3 {
		c := dialRaw(t, s.KafkaAddrs()[0])
		if resp := c.authenticate("PLAIN", credA); resp.ErrorCode != 0 {
			t.Fatalf("A's SASL: %d", resp.ErrorCode)
		}
		c.nc.(*net.TCPConn).SetReadBuffer(4096)
		c.send(flood)
		// The answer's size, nothing more: what the gateway now holds
		// until A reads it, or the connection closed unanswered.
		c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(c.nc, size[:]); err == nil {
			held += int(binary.BigEndian.Uint32(size[:]))
		} else if !closedConn(err) {
			t.Fatalf("A's connection: %v", err)
		}
	}
	status, body := fetchB()
	if status != http.StatusOK {
		t.Fatalf("B's fetch while A holds %d bytes of unread refusals: %d %s; want 200", held, status, body)
	}
	t.Logf("A's unread refusals: %d bytes answered; B served", held)
}

// closedConn reports whether err is the peer closing the connection.
func closedConn(err error) bool {
	var op *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset"))
}
