package main

import (
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/capgate/capgate/tlsconf"
)

// tlsFlags are --cacert, --cert and --key of every command that talks to
// a coordinator or gateway over https (curl's names), defaulting to
// $CAPGATE_CACERT, $CAPGATE_CERT and $CAPGATE_KEY.
type tlsFlags struct {
	cacert, cert, key string
}

func (f *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cacert, "cacert", envOr("CAPGATE_CACERT", ""), "PEM CA bundle the servers' certificates must chain to ($CAPGATE_CACERT; capgate dev --tls writes one); empty: the system roots")
	fs.StringVar(&f.cert, "cert", envOr("CAPGATE_CERT", ""), "PEM client certificate for mTLS ($CAPGATE_CERT)")
	fs.StringVar(&f.key, "key", envOr("CAPGATE_KEY", ""), "PEM private key of --cert ($CAPGATE_KEY)")
}

func (f *tlsFlags) files() tlsconf.ClientConfig {
	return tlsconf.ClientConfig{CAFile: f.cacert, CertFile: f.cert, KeyFile: f.key}
}

// dialTimeout bounds one connection attempt of the CLI's coordinator
// calls: a replica that does not accept within it is skipped for the
// next listed one within the same call (client.NewLeaderTransport), so
// a dead host costs seconds of the command's timeout, not
// http.DefaultTransport's 30.
const dialTimeout = 5 * time.Second

// httpClient is an HTTP client with these TLS settings and timeout.
func (f *tlsFlags) httpClient(timeout time.Duration) (*http.Client, error) {
	tc, err := f.files().TLS(nil)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSClientConfig = tc
	return &http.Client{Timeout: timeout, Transport: t}, nil
}
