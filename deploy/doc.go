// Package deploy holds what an operator installs next to capgate: a
// Grafana dashboard (grafana/capgate.json) and Prometheus alert rules
// (prometheus/alerts.yml). Its test starts a coordinator and a gateway on
// loopback (internal/stack, kfake), makes them serve a join, heartbeats,
// syncs and fetches, scrapes their /metrics and fails when a rule or a
// panel names a metric neither exports, or when Prometheus's own parsers
// (model/rulefmt, promql/parser) refuse the rules or an expression.
package deploy
