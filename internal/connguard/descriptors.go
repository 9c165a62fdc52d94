package connguard

import (
	"fmt"

	"go.uber.org/zap"
)

// DescriptorMargin is what a process keeps for descriptors that are not
// client connections: its broker connections, a store's files, logs,
// the sync client, a refused connection's lingering close.
const DescriptorMargin = 512

// minFitted is the fewest connections FitDescriptors leaves.
const minFitted = 16

// Budget is one setting's share of the descriptors.
type Budget struct {
	Setting string // e.g. "gateway.kafka_max_connections"
	Conns   int
}

// FitDescriptors is the bound of HTTP connections a Listener should
// keep: http.Conns, or fewer when http, the other budgets (the Kafka
// listener's connections) and DescriptorMargin exceed the descriptor
// limit (RLIMIT_NOFILE) — past it accepts fail with EMFILE (retried,
// but the process's broker connections and store files fail too), while
// below it a connection beyond is answered 503. A fitted bound is logged
// naming the limit and every setting: at WARN when it keeps less than
// half of http.Conns (the host is clearly under-provisioned for the
// settings), else at DEBUG — an INFO line at every start, capgate dev's
// too, saying 18,464 of 20,000 connections were kept asked nothing of
// anyone (newuser11); the bound kept is the gauge
// capgate_<process>_http_connections_max. At least minFitted are kept.
func FitDescriptors(log *zap.Logger, http Budget, others ...Budget) int {
	limit, ok := DescriptorLimit()
	if !ok {
		return http.Conns
	}
	return fitAndLog(log, limit, http, others)
}

// fitAndLog is FitDescriptors under limit.
func fitAndLog(log *zap.Logger, limit uint64, http Budget, others []Budget) int {
	fitted, msg := fitDescriptors(limit, http, others)
	switch {
	case msg == "":
	case 2*fitted >= http.Conns:
		log.Debug(msg)
	default:
		log.Warn(msg)
	}
	return fitted
}

// fitDescriptors is FitDescriptors's arithmetic: the bound, and the
// message ("" when http.Conns fits).
func fitDescriptors(limit uint64, http Budget, others []Budget) (int, string) {
	need := http.Conns + DescriptorMargin
	names := fmt.Sprintf("%s %d", http.Setting, http.Conns)
	for _, b := range others {
		need += b.Conns
		names += fmt.Sprintf(" + %s %d", b.Setting, b.Conns)
	}
	if uint64(need) <= limit {
		return http.Conns, ""
	}
	fitted := http.Conns - int(min(uint64(need)-limit, uint64(http.Conns)))
	fitted = max(fitted, minFitted)
	return fitted, fmt.Sprintf("the file descriptor limit (RLIMIT_NOFILE %d) is below what the connection settings allow (%d = %s + margin %d): at most %d HTTP connections are served at once (beyond: 503 overloaded) instead of %s %d; raise the limit (ulimit -n, LimitNOFILE=) or lower the settings",
		limit, need, names, DescriptorMargin, fitted, http.Setting, http.Conns)
}
