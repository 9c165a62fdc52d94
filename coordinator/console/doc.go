// Package console is the operator's web console the coordinator serves at
// /console: groups, a live partition grid and handoff timeline, gateways,
// QoS overrides, and the admin actions, with confirmation.
package console
