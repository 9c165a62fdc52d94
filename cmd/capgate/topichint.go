package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// missingTopicHint is err with what to do when it says a topic does not
// exist: the coordinator's "unknown topic "orders": Kafka has no such
// topic" (a join, an admin token's mint) or a gateway's "unknown topic or
// partition" (a credential's produce) ended consume and produce with no
// word of where the topics are listed or how capgate dev gets another
// (newuser10).
func missingTopicHint(err error) error {
	var code api.Code
	var message string
	if ce := (*client.Error)(nil); errors.As(err, &ce) {
		code, message = ce.Code, ce.Message
	} else if ae := (*api.Error)(nil); errors.As(err, &ae) {
		code, message = ae.Code, ae.Message
	}
	if code != api.CodeNotFound || !(strings.Contains(message, "Kafka has no such topic") || strings.HasPrefix(message, "unknown topic or partition")) {
		return err
	}
	return fmt.Errorf("%w\n(capgate admin topics lists the topics Kafka has; capgate dev creates more with --topic NAME[:PARTITIONS])", err)
}
