package coordinator

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/tlsconf"
)

// BodyLimitOf is the body cap c's server gives a request of method and
// uri with that Authorization header (announcing a 1 MiB body), as if
// tls.admin.auth were certificate when adminByCertificate.
func BodyLimitOf(c *Coordinator, method, uri, authorization string, adminByCertificate bool) int {
	var h fasthttp.RequestHeader
	h.SetMethod(method)
	h.SetRequestURI(uri)
	h.SetContentLength(1 << 20)
	if authorization != "" {
		h.Set(fasthttp.HeaderAuthorization, authorization)
	}
	saved := c.cfg.TLS.Admin
	defer func() { c.cfg.TLS.Admin = saved }()
	if adminByCertificate {
		c.cfg.TLS.Admin.Auth = tlsconf.AuthCertificate
	}
	return c.bodyLimit(&h)
}
