package kafkaclients

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// kgoClient is a kgo client of the gateways' Kafka listener that
// authenticates with token over OAUTHBEARER (plain: over PLAIN).
func kgoClient(t testing.TB, addrs []string, token string, usePlain bool, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	mech := oauthToken(token)
	if usePlain {
		mech = plain.Auth{User: "capgate", Pass: token}.AsMechanism()
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.SASL(mech), kgo.RetryTimeout(10 * time.Second)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// oauthToken is kgo's OAUTHBEARER mechanism with a fixed token.
func oauthToken(token string) sasl.Mechanism {
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token}, nil })
}
