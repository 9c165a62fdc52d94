package coordinator

import (
	"fmt"
	"strings"
)

// validateAdvertiseScheme refuses a replica.advertise whose scheme is not
// what the listener serves: every 421 not_leader would send clients to it.
func (c Config) validateAdvertiseScheme() error {
	scheme, _, _ := strings.Cut(c.Replica.Advertise, "://")
	switch {
	case c.Replica.Advertise == "":
	case scheme == "https" && !c.TLS.Enabled():
		return fmt.Errorf("replica.advertise: %q is https but the listener serves plain HTTP (no tls.cert_file): configure tls, or advertise http://", c.Replica.Advertise)
	case scheme == "http" && c.TLS.Enabled():
		return fmt.Errorf("replica.advertise: %q is http but the listener serves HTTPS (tls.cert_file is set): advertise https://", c.Replica.Advertise)
	}
	return nil
}
