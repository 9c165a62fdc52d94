package client

import (
	"strconv"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client/session"
)

// logRevokeTimedOut warns that revoked partitions were released at
// revoke_timeout while the application may still hold records Poll
// returned of them (it neither polled, committed nor marked them since):
// the next holder reads them again from the offset released at, perhaps
// while this consumer still processes them.
func (c *Consumer) logRevokeTimedOut(a session.RevokeTimedOut) {
	fields := make([]zap.Field, 0, len(a.Partitions)+1)
	fields = append(fields, zap.Duration("revoke_timeout", a.Timeout))
	for _, p := range a.Partitions {
		// released at offset..delivered: the records the next holder reads again
		fields = append(fields, zap.String(p.Partition.String(),
			strconv.FormatInt(p.Processed, 10)+".."+strconv.FormatInt(p.Delivered, 10)))
	}
	c.log.Warn("revoke_timeout passed before the records Poll returned of revoked partitions were done with "+
		"(no Poll, Commit or Mark of them since): released at the processed offset; the next holder "+
		"reads them again from there, perhaps while this consumer still processes them", fields...)
}
