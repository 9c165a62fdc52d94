package driver

import (
	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// SyncResponse renders the machine's sync answer. keys is the whole
// public key set, attached on a reset and whenever the signing keys
// changed (empty keys mean "unchanged"); settings, the coordinator's own,
// ride on every reset (gateways learn them instead of configuring them).
func SyncResponse(r group.SyncReply, keys func() []api.JWK, settings *api.CoordinatorSettings) api.SyncResponse {
	out := api.SyncResponse{
		Seq: r.Seq, Reset: r.Reset, Fences: r.Fences, Denied: r.Denied,
		RevokedMembers: r.RevokedMembers, QoS: r.QoS,
	}
	if r.KeysChanged || r.Reset {
		out.Keys = keys()
	}
	if r.Reset {
		out.Settings = settings
	}
	return out
}
