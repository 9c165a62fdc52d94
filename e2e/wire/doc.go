// Package wire tests capgate's own wire security end to end, over real
// TLS sockets between real processes' code (kfake, a coordinator and
// gateways built by internal/stack with a throwaway PKI, the SDK, plain
// net/http clients): plaintext and wrong-CA clients refused, the sync
// channel demanding a gateway's client certificate, consumers' client
// certificates on the gateway, certificate files replaced without a
// restart while long polls are held. The benchmarks compare TLS with
// plaintext in the same run.
package wire
