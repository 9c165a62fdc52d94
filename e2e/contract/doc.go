// Package contract holds the API contract (api/openapi.yaml) to running
// processes: a client driven by the document (apicheck.Client, which
// validates every request and answer with kin-openapi) performs the
// README's walk-through against a real coordinator, gateway and kfake,
// and every documented operation is probed on the processes that serve
// it. The static half (routers ↔ document) is api/apicheck's test.
package contract
