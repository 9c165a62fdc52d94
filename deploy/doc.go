// Package deploy holds what an operator installs next to capgate: a
// Grafana dashboard (grafana/capgate.json) and Prometheus alert rules
// (prometheus/alerts.yml). Its test starts two coordinator replicas
// (state: kafka) and a gateway on loopback under default settings
// (internal/stack, kfake), makes them serve a join, heartbeats, syncs and
// fetches, scrapes the leader's, the standby's and the gateway's /metrics
// and fails when a rule or a panel names a metric none of them exports
// (unless it names the setting that brings it, checked on a coordinator
// with it), when a replica lacks its process's metrics, or when
// Prometheus's own parsers (model/rulefmt, promql/parser) refuse the
// rules or an expression.
package deploy
