package kafkaclients

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka protocol by hand (kmsg for bodies) so tests
// can send what no client library would: bad frames, bad orders.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req at its set version (default: the highest we implement).
func (r *rawConn) send(req kmsg.Request) {
	r.t.Helper()
	r.corr++
	if _, err := r.nc.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// recv reads one response into resp (set to the request's version).
func (r *rawConn) recv(resp kmsg.Response) error {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		return err
	}
	b := kbin.Reader{Src: body}
	if corr := b.Int32(); corr != r.corr {
		return fmt.Errorf("correlation %d, want %d", corr, r.corr)
	}
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		kmsg.SkipTags(&b)
	}
	return resp.ReadFrom(b.Src)
}

// roundTrip sends req and reads its response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(req)
	resp := req.ResponseKind()
	if err := r.recv(resp); err != nil {
		r.t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// closedBy reports whether the server closes the connection within d
// (reading nothing else); it fails the test if bytes arrive instead.
func (r *rawConn) closedBy(d time.Duration) bool {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := r.nc.Read(b[:])
	switch {
	case err == nil:
		r.t.Fatalf("server sent data instead of closing")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	}
	return true
}

// authenticate runs SaslHandshake v1 + SaslAuthenticate with mechanism.
func (r *rawConn) authenticate(mechanism, token string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mechanism
	if resp := r.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		r.t.Fatalf("handshake %s: error %d", mechanism, resp.ErrorCode)
	}
	return r.saslAuthenticate(mechanism, token)
}

func (r *rawConn) saslAuthenticate(mechanism, token string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	return r.roundTrip(authRequest(mechanism, token)).(*kmsg.SASLAuthenticateResponse)
}

// authRequest is a SaslAuthenticate v2 carrying token for mechanism.
func authRequest(mechanism, token string) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(2)
	req.SASLAuthBytes = saslMessage(mechanism, token)
	return req
}

func saslMessage(mechanism, token string) []byte {
	if strings.EqualFold(mechanism, "PLAIN") {
		return []byte("\x00capgate\x00" + token)
	}
	return []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
}

// fetchOne builds a Fetch v12 of one partition from offset.
func fetchOne(topic string, partition int32, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, 1, 1<<20
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = partition, offset, 1<<20, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// listLatest is a ListOffsets v7 request for topic/partition's end.
func listLatest(topic string, partition int32) *kmsg.ListOffsetsRequest {
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(7)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = partition, -1
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	return list
}

// produceRecord is a Produce v9 request (acks all) of one record holding
// value to topic/partition.
func produceRecord(topic string, partition int32, value string, timeoutMillis int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, timeoutMillis
	rt := produceTopic(topic, partition)
	rt.Partitions[0].Records = recordBatch(value)
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}
