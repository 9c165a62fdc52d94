// Package api holds the JSON wire types shared by the coordinator, the
// gateways and the consumer SDK (DESIGN §5), and the reject table of every
// HTTP boundary: one error code, one status, one retriable flag.
//
// The types carry no behaviour beyond encoding; every process validates what
// it decodes. Everything here is safe for concurrent use (immutable tables).
package api
