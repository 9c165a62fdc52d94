package connguard

import (
	"fmt"

	"go.uber.org/zap"
)

// DescriptorMargin is what a process keeps for descriptors that are not
// client connections: its broker connections, a store's files, logs,
// the sync client, a refused connection's lingering close.
const DescriptorMargin = 512

// Budget is one setting's share of the descriptors.
type Budget struct {
	Setting string // e.g. "gateway.max_connections"
	Conns   int
}

// CheckDescriptors warns (ERROR) when the connections the settings allow,
// plus DescriptorMargin, exceed the descriptor limit: beyond it accepts
// fail with EMFILE (retried: Listener) and the process's other files
// (broker connections, the store) fail too. It returns the line's
// message, "" when everything fits or the limit is unknown.
func CheckDescriptors(log *zap.Logger, budgets ...Budget) string {
	limit, ok := DescriptorLimit()
	if !ok {
		return ""
	}
	return checkDescriptors(log, limit, budgets)
}

func checkDescriptors(log *zap.Logger, limit uint64, budgets []Budget) string {
	need := DescriptorMargin
	fields := []zap.Field{zap.Uint64("rlimit_nofile", limit), zap.Int("margin", DescriptorMargin)}
	names := ""
	for _, b := range budgets {
		need += b.Conns
		fields = append(fields, zap.Int(b.Setting, b.Conns))
		names += fmt.Sprintf(" + %s %d", b.Setting, b.Conns)
	}
	if uint64(need) <= limit {
		return ""
	}
	msg := fmt.Sprintf("the file descriptor limit (RLIMIT_NOFILE %d) is below what the connection settings allow (%d = %s + margin %d): under a connection flood accepts fail with \"too many open files\" (retried) and broker and store files fail too; raise the limit (ulimit -n, LimitNOFILE=) or lower the settings",
		limit, need, names[3:], DescriptorMargin)
	log.Error(msg, fields...)
	return msg
}
