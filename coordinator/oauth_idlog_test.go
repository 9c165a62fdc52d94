package coordinator_test

import (
	"testing"
)

// TestOAuthSecretSentAsTheIDIsNotLogged (redteam17): a refused token
// request is logged with the client id it sent, and a client that swaps
// its id and secret (a form's fields, Basic's user and password: a
// configuration mistake made once) sends its secret as the id — which
// went into the coordinator's log whole (the id was cut to 128 bytes, a
// secret is 43). An id not shaped as the coordinator's ids is logged by
// its length only; a real id is still named.
func TestOAuthSecretSentAsTheIDIsNotLogged(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	c := createOAuthClient(t, h, "swapped", []string{"g"})
	if status, _, _ := tokenRequest(t, h, clientCredentialsForm("client_id", c.ClientSecret, "client_secret", c.ClientID), nil); status != 401 {
		t.Fatalf("swapped form fields: %d, want 401", status)
	}
	if status, _, _ := tokenRequest(t, h, clientCredentialsForm(), []string{c.ClientSecret, c.ClientID}); status != 401 {
		t.Fatalf("swapped Basic user and password: %d, want 401", status)
	}
	if status, _, _ := tokenRequest(t, h, clientCredentialsForm("client_id", c.ClientID, "client_secret", "wrong"), nil); status != 401 {
		t.Fatalf("wrong secret: %d, want 401", status)
	}
	named := 0
	for _, entry := range e.logs.FilterMessage("oauth client refused").All() {
		if entry.ContextMap()["client_id"] == c.ClientID {
			named++
		}
	}
	if named == 0 {
		t.Fatalf("no refusal names the real client id %q: %v", c.ClientID, e.logs.FilterMessage("oauth client refused").All())
	}
	e.checkLogs(t) // no secret in any line
}
