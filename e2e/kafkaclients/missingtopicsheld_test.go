package kafkaclients

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMissingTopicNamesHeldBounded is redteam19 #3: a Metadata request
// naming topics Kafka does not have is logged once per client and topic
// every 10 minutes, and the gateway remembered each (client, topic) pair
// it logged — up to 4,096 of them — with the name and the client.id as
// sent: Kafka caps neither below 32,767 bytes on the wire. A credential
// for "a-*" naming 4,096 topics of 32,000 characters (16 Metadata
// requests of 8 MB) left ~131 MB in the gateway for 10 minutes, again
// after each clearing. Now a remembered name and client.id are cut to
// Kafka's longest topic name, as the log lines already cut the names.
// Fails without (the heap ~128 MB larger after the requests).
func TestMissingTopicNamesHeldBounded(t *testing.T) {
	s := Start(t, Options{Partitions: 1})
	cred, err := s.Stack.ClientCredential(context.Background(), "tenant-a", []string{"a-*"}, []string{"a-*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := dialAuthenticatedRaw(t, s, cred)
	before := heapInUse()
	long := make([]byte, 16000)
	for range 16 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		for range 256 {
			rand.Read(long)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("a-" + hex.EncodeToString(long)) // 32,002 characters
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 256 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("Metadata of 256 missing topics: %d answered, the first %d", len(resp.Topics), resp.Topics[0].ErrorCode)
		}
	}
	after := heapInUse()
	if grown := int64(after) - int64(before); grown > 32<<20 {
		t.Errorf("4,096 missing topic names of 32,002 characters asked for: the heap grew %d MB, want at most 32", grown>>20)
	}
}

// dialAuthenticatedRaw dials the first gateway's Kafka listener and
// authenticates with token (SASL PLAIN).
func dialAuthenticatedRaw(t *testing.T, s *Stack, token string) *rawConn {
	t.Helper()
	c := dialRaw(t, s.KafkaAddrs()[0])
	if resp := c.authenticate("PLAIN", token); resp.ErrorCode != 0 {
		t.Fatalf("SASL: %d", resp.ErrorCode)
	}
	return c
}

// heapInUse is the heap allocated after a collection: what the
// in-process gateway (and the test) still hold.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
