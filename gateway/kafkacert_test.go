package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/tlsconf"
)

// TestKafkaListenerNeedsConsumerCertificateToo: the attack is a stolen
// capability used where the HTTP record routes would refuse it. With
// gateway.tls.consumers at token+certificate, a kgo client presenting the
// capability over SASL PLAIN on the gateway's Kafka listener reads
// nothing without a client certificate, or with one whose name the rule
// does not allow; with an allowed certificate it reads the records. (The
// listener itself is tested in kafkaproto; this is the gateway handing it
// its rule: before, kafkaConfig left it out and the token alone read.)
func TestKafkaListenerNeedsConsumerCertificateToo(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := tlsconf.NewCA("test CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("gateway", []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := server.Write(dir, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := tlsconf.WriteFile(caFile, ca.PEM); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		c.TLS.ServerConfig = tlsconf.ServerConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile,
			ClientAuth: tlsconf.ClientAuthIfGiven, ReloadInterval: time.Hour}
		c.TLS.Consumers = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"consumer-*"}}
		c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1
	}})
	h.waitReady()
	h.produce(0, 3)
	token, _ := h.mint(capClaims(0))
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	// read asks for metadata, then consumes orders/0, with the capability
	// as the SASL PLAIN password, presenting a certificate of name (none
	// when ""); it returns the records read before its context ended, or
	// the metadata request's error.
	read := func(name string) (records int, metaErr error) {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if name != "" {
			leaf, err := ca.Issue(name, nil, now, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := leaf.TLS()
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.DialTLSConfig(tc),
			kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// A deadline, not a wait: a refusal answers at once, an allowed
		// client reads its 3 records (TLS, SASL, metadata, fetch) well
		// within it even under the race detector on busy cores.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, metaErr = cl.Request(ctx, kmsg.NewPtrMetadataRequest()); metaErr != nil {
			return 0, metaErr // refused at SASL: the connection is closed, nothing is read on it
		}
		for records < 3 && ctx.Err() == nil {
			records += cl.PollFetches(ctx).NumRecords()
		}
		return records, nil
	}
	for _, name := range []string{"", "intruder"} {
		if n, err := read(name); n != 0 || err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("certificate %q with a good capability: metadata error %v, %d records; want SASL_AUTHENTICATION_FAILED and none", name, err, n)
		}
	}
	if n, err := read("consumer-1"); err != nil || n != 3 {
		t.Fatalf("an allowed certificate with the capability: metadata error %v, %d records; want none and 3", err, n)
	}
}
