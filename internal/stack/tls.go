package stack

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/tlsconf"
)

// PKI is a throwaway CA for a stack whose listeners speak TLS, and the
// certificates it issues (files in Dir, keys 0600). Safe for concurrent
// use.
type PKI struct {
	Dir    string
	CAFile string
	ca     *tlsconf.CA
	mu     sync.Mutex
	issued map[string][2]string // name → cert, key files
}

// NewPKI makes a CA in dir.
func NewPKI(dir string) (*PKI, error) {
	ca, err := tlsconf.NewCA("capgate test CA", time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), ca: ca, issued: map[string][2]string{}}
	if err := tlsconf.WriteFile(p.CAFile, ca.PEM); err != nil {
		return nil, err
	}
	return p, nil
}

// Issue returns the certificate named name (for 127.0.0.1 and localhost,
// server and client use), Dir/name.crt and Dir/name.key, making it on
// first use.
func (p *PKI) Issue(name string) (certFile, keyFile string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.issued[name]; ok {
		return f[0], f[1], nil
	}
	return p.issueLocked(name)
}

// Reissue replaces name's certificate and key with new ones (each file
// renamed over the old one): a certificate rotation on disk.
func (p *PKI) Reissue(name string) (certFile, keyFile string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issueLocked(name)
}

// RotateCA replaces the CA with a new one, as at the end of a CA
// rotation: CAFile holds the new CA alone, and every certificate issued
// so far is issued again by it (each file renamed over the old one).
// Whatever follows CAFile (tlsconf.Client: the gateways' sync client,
// the SDK, the stack's own client) trusts only the new CA from its next
// re-read on.
func (p *PKI) RotateCA() error {
	ca, err := tlsconf.NewCA("capgate test CA (rotated)", time.Now(), 24*time.Hour)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ca = ca
	if err := tlsconf.WriteFile(p.CAFile, ca.PEM); err != nil {
		return err
	}
	for name := range p.issued {
		if _, _, err := p.issueLocked(name); err != nil {
			return err
		}
	}
	return nil
}

func (p *PKI) issueLocked(name string) (string, string, error) {
	leaf, err := p.ca.Issue(name, []string{"127.0.0.1", "localhost"}, time.Now(), 24*time.Hour)
	if err != nil {
		return "", "", err
	}
	cert, key, err := leaf.Write(p.Dir, name)
	if err == nil {
		p.issued[name] = [2]string{cert, key}
	}
	return cert, key, err
}

// Client is the client TLS of name: the CA, and name's certificate
// unless name is "".
func (p *PKI) Client(name string) (tlsconf.ClientConfig, error) {
	c := tlsconf.ClientConfig{CAFile: p.CAFile}
	if name == "" {
		return c, nil
	}
	var err error
	c.CertFile, c.KeyFile, err = p.Issue(name)
	return c, err
}

// HTTPClient is an HTTP client with name's client TLS (see Client).
func (p *PKI) HTTPClient(name string, timeout time.Duration) (*http.Client, error) {
	c, err := p.Client(name)
	if err != nil {
		return nil, err
	}
	tc, err := c.Client(nil)
	if err != nil {
		return nil, err
	}
	t := &http.Transport{MaxIdleConnsPerHost: 64}
	tc.Apply(t)
	return &http.Client{Timeout: timeout, Transport: t}, nil
}

// Apply turns TLS on in opts: https URLs and a probing client trusting
// the CA; the coordinator serves "coordinator"'s certificate and asks
// clients for certificates signed by the CA; gateway i serves
// "gateway-<i+1>"'s certificate and presents it on the sync channel; SDK
// configurations trust the CA. Edits already in opts run afterwards
// (choose tls.sync.auth, client_auth, reload_interval there).
func (p *PKI) Apply(opts *Options) error {
	coordCert, coordKey, err := p.Issue("coordinator")
	if err != nil {
		return err
	}
	if opts.HTTP, err = p.HTTPClient("", 30*time.Second); err != nil {
		return err
	}
	opts.Scheme, opts.ClientTLS = "https", tlsconf.ClientConfig{CAFile: p.CAFile}
	editCoordinator, editGateway := opts.Coordinator, opts.Gateway
	opts.Coordinator = func(i int, cfg *coordinator.Config) {
		cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile = coordCert, coordKey, p.CAFile
		if editCoordinator != nil {
			editCoordinator(i, cfg)
		}
	}
	opts.Gateway = func(i int, cfg *gateway.Config) {
		cert, key, err := p.Issue(fmt.Sprintf("gateway-%d", i+1))
		if err != nil {
			cert, key = "", "" // the gateway's config then fails validation, naming the field
		}
		cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile = cert, key, p.CAFile
		cfg.CoordinatorTLS = tlsconf.ClientConfig{CAFile: p.CAFile, CertFile: cert, KeyFile: key}
		if editGateway != nil {
			editGateway(i, cfg)
		}
	}
	return nil
}
