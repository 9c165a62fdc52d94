// Package tlsconf turns TLS settings (PEM files named in the config) into
// crypto/tls configurations for capgate's listeners and clients, and
// reloads the files when they change, without a restart.
//
// Server: NewServer loads cert_file, key_file and client_ca_file; its
// Config answers every handshake (GetConfigForClient) from one immutable
// snapshot, re-read lazily at most once per reload_interval. A snapshot is
// swapped only when the whole set parses and the key matches the
// certificate, so a half-written pair never serves: the old one stays until
// the files agree again. TLS 1.2 is the floor, with AEAD ECDHE suites only;
// HTTP/1.1 is the only ALPN protocol (fasthttp speaks no HTTP/2). A key
// file its group or others may read is refused (internal/secretfile, the
// rule of the signing key ring and the KEK), at start and on every
// reload; an expired or not-yet-valid certificate is served with a
// warning at start and on each reload that loads it, and NotAfter tells
// the metrics when the served one expires.
//
// Client certificates are asked for (VerifyClientCertIfGiven) whenever a
// client CA is configured, and each listener decides per route whether one
// is required (Channel): one listener serves public, consumer, sync and
// admin routes, so a load balancer's /healthz needs no certificate while
// /v1/sync can demand the gateway's. client_auth: require makes the
// handshake itself refuse certificate-less clients instead.
//
// Client: ClientConfig.Client builds the TLS of a long-lived client (the
// SDK, the gateway's sync and group clients, the IdP key sets): the CA
// bundle and the client certificate are re-read the same way, and each
// connection gets a tls.Config of its own (the bundle as last read, the
// host dialled as ServerName), so a CA rotated on disk needs no restart
// and IP-literal URLs stay verified. ClientConfig.TLS is a snapshot for
// a one-shot client (the CLI).
//
// Generate makes a throwaway CA and certificates for `capgate dev --tls`
// and tests. Everything here is safe for concurrent use.
package tlsconf
