package kafkaproto

// Behavior: an HTTP request on the Kafka port (a URL pointed at it), and
// a client whose security.protocol does not match the listener
// — SSL/SASL_SSL to a plaintext listener (its first bytes are a TLS
// handshake, read as a frame of ~369 MB), PLAINTEXT/SASL_PLAINTEXT to a
// TLS one (the TLS handshake reads a Kafka frame) — is closed as before,
// and logged at warn (refusallog's bound) with what to set: it was a
// debug line, so the operator saw nothing while the client retried
// (kcat hints at the cause; kgo retries without a word unless it has a
// logger).

import (
	"crypto/tls"
	"errors"

	"go.uber.org/zap"
)

// errTLSOnPlaintext: a TLS ClientHello on the plaintext listener;
// errHTTPOnKafka: an HTTP request (a gateway's or coordinator's URL
// pointed at the Kafka port).
var (
	errTLSOnPlaintext = errors.New("kafkaproto: a TLS handshake on the plaintext Kafka listener")
	errHTTPOnKafka    = errors.New("kafkaproto: an HTTP request on the Kafka listener")
)

// looksLikeHTTP reports whether a frame's size prefix is an HTTP
// request line's start.
func looksLikeHTTP(prefix [4]byte) bool {
	switch string(prefix[:]) {
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "PRI ":
		return true
	}
	return false
}

// looksLikeTLS reports whether a frame's size prefix is a TLS record
// header's start: a handshake record (22) of TLS 1.x (3, 0–4).
func looksLikeTLS(prefix [4]byte) bool {
	return prefix[0] == 22 && prefix[1] == 3 && prefix[2] <= 4
}

// securityMismatch is what to tell the operator when err says the client
// speaks the other security protocol; "" otherwise.
func securityMismatch(err error) string {
	var header tls.RecordHeaderError
	switch {
	case errors.Is(err, errTLSOnPlaintext):
		return "a TLS client on the plaintext Kafka listener (security.protocol SSL or SASL_SSL): " +
			"the client should use SASL_PLAINTEXT, or serve TLS on the gateway (gateway.tls)"
	case errors.Is(err, errHTTPOnKafka):
		return "an HTTP request on the Kafka listener: HTTP clients (capgate consume and produce, the SDK, curl) " +
			"use the gateway's HTTP address (gateway.listen); this port is for Kafka clients"
	case errors.As(err, &header):
		return "a plaintext client on the TLS Kafka listener (security.protocol PLAINTEXT or SASL_PLAINTEXT): " +
			"the client should use SASL_SSL, trusting the gateway's CA"
	}
	return ""
}

// logSecurityMismatch logs a connection closed for a security protocol
// mismatch; false when err is none.
func (c *conn) logSecurityMismatch(err error) bool {
	why := securityMismatch(err)
	if why == "" {
		return false
	}
	c.s.refused.Refused("kafka connection", why, zap.String("remote", c.nc.RemoteAddr().String()))
	return true
}
