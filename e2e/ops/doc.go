// Package ops holds the operator's defects of issue #13, each written as
// a test named after it against real parts: kfake, a coordinator with its
// badger store and gateways on loopback (internal/stack), real HTTP, and
// their /metrics and /readyz as a scraper or a probe sees them. Each test
// failed on the code before the fix it guards.
package ops
