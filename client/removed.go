package client

import (
	"strings"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
)

// logRemoved tells the user the coordinator removed this member and the
// consumer joins again (driver.MemberRemoved). An administrator's
// revoke-member or group delete --force removes a member, as Kafka's
// RemoveMembersFromConsumerGroup does, and like a Kafka consumer this one
// rejoins: what stops it is denying its credential (admin
// revoke-capability), which the next join then meets. Without this
// warning the rejoin was silent (an info line below consume's default
// level), and the operator believed the consumer gone.
func (c *Consumer) logRemoved(r driver.MemberRemoved) {
	fields := []zap.Field{zap.String("member", r.Member), zap.NamedError("reason", r.Err)}
	if r.Unheard {
		c.log.Warn("member expired: the coordinator did not hear from it within its session timeout; its partitions are lost, joining again", fields...)
		return
	}
	if r.Removed == api.RemovedPatternUnrestored {
		c.log.Warn("member removed: the coordinator restarted and restored it without its topic_pattern's topics "+
			"(its tenant's patterns cost more than a restore matches); joining again, which matches the pattern", fields...)
		return
	}
	stop := "to stop this consumer, revoke its credential: capgate admin revoke-capability JTI"
	if c.opts.credentials == nil {
		if jti := driver.TokenID(c.cfg.Credential); jti != "" {
			// "--": a jti minted before jtis stopped beginning with '-'
			// would read as a flag (ocap.Minter.NewJTI).
			stop = "to stop this consumer, revoke its credential: capgate admin revoke-capability " + dashDash(jti) + jti
			fields = append(fields, zap.String("credential_jti", jti))
		}
	}
	c.log.Warn("member revoked by an administrator: joining again, as Kafka consumers do after a member is removed; "+stop, fields...)
}

// dashDash is "-- " when arg begins with '-', which a command line would
// read as a flag.
func dashDash(arg string) string {
	if strings.HasPrefix(arg, "-") {
		return "-- "
	}
	return ""
}
