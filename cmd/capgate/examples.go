package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples is each command's Examples section of --help, by its path
// below the root: what rpk shows under every command, so a first-day user
// sees a working line before reading the flags (only `admin audit` and
// `admin qos end` had one, newuser9). Every line beginning "capgate " is
// parsed against the command tree by TestEveryCommandHasWorkingExamples
// — its flags, arguments and required flags — so none rots; the admin
// examples use the names of README's walk-through and `capgate dev`'s
// topic demo. A command's own Example (set where it is made) wins.
var examples = map[string]string{
	"": `  capgate dev                                   # a local stack: Kafka, coordinator, gateway
  . ./capgate-data/credentials.env              # in another shell: addresses and tokens
  echo hello | capgate produce -t demo -p 0
  capgate consume -g readme -t demo -o start -n 1
  capgate admin groups
  capgate help environment                      # the variables every command reads`,
	"dev": `  capgate dev
  capgate dev --demo
  capgate dev --tls
  capgate dev --replicas 3
  capgate dev --topic orders:6 --topic audit`,
	"coordinator": `  capgate keys generate --out keys.json
  capgate coordinator --config capgate.yaml`,
	"gateway": `  capgate gateway --config capgate.yaml`,
	"consume": `  capgate consume -g readme -t demo
  capgate consume -g readme -t demo -o start -n 10 -f json
  capgate consume -g orders-eu -t demo --credential-file orders.json --idle-exit 10s
  capgate consume -g readme --topic-pattern 'de.*'`,
	"produce": `  echo hello | capgate produce -t demo -p 0
  printf 'k1:v1\nk2:v2\n' | capgate produce -t demo -K :
  capgate produce -t demo --credential-file writer.json -o json < lines.txt`,
	"version": `  capgate version
  capgate version -o json`,
	"keys": `  capgate keys generate --out keys.json
  capgate keys secret`,
	"keys generate": `  capgate keys generate --out keys.json`,
	"keys jwks":     `  capgate keys jwks --file keys.json`,
	"keys kek":      `  capgate keys kek --out kek.key`,
	"keys rotate":   `  capgate keys rotate --token-file capgate-data/credentials.json`,
	"keys secret":   `  capgate keys secret                           # a token and the hash its config takes`,
	"token":         `  capgate token inspect "$CAPGATE_CREDENTIAL"`,
	"token inspect": `  capgate token inspect "$CAPGATE_CREDENTIAL"
  capgate token inspect - < capability.txt`,
	"admin": `  capgate admin groups
  capgate admin group readme
  capgate admin --token-file capgate-data/credentials.json topics -o json`,
	"admin groups":         `  capgate admin groups -o table`,
	"admin group":          `  capgate admin group readme`,
	"admin group describe": `  capgate admin group describe readme -o json`,
	"admin group delete": `  capgate admin group delete readme
  capgate admin group delete readme --force     # revokes its live members first`,
	"admin topics":         `  capgate admin topics`,
	"admin topic":          `  capgate admin topic demo`,
	"admin topic describe": `  capgate admin topic describe demo -o json`,
	"admin offsets":        `  capgate admin offsets readme`,
	"admin offsets reset": `  capgate admin offsets reset readme demo 0 --to earliest
  capgate admin offsets reset readme demo --to latest   # every partition`,
	"admin config": `  capgate admin config readme --max-moves-per-second 2
  capgate admin config readme --offset-reset earliest`,
	"admin gateways":          `  capgate admin gateways`,
	"admin grant":             `  capgate admin grant --topic demo --partition 3 --holder auditor --ttl 5m`,
	"admin lease":             `  capgate admin lease readme demo 5 --holder backfill --ttl 5m > lease.json`,
	"admin revoke":            `  capgate admin revoke readme demo 5 --reason "backfill done"`,
	"admin revoke-member":     `  capgate admin revoke-member readme MEMBER_ID --reason "stuck consumer"`,
	"admin revoke-capability": `  capgate admin revoke-capability JTI --reason "leaked"   # the jti: capgate token inspect`,
	"admin rotate-keys":       `  capgate admin rotate-keys`,
	"admin client-credential": `  capgate admin client-credential --name orders-svc --groups 'orders-*' > orders.json
  capgate admin client-credential --name writer --groups writer --topics demo --ops consume,produce > writer.json`,
	"admin oauth-client":        `  capgate admin oauth-client create --name billing --groups 'billing-*' --topics demo`,
	"admin oauth-client create": `  capgate admin oauth-client create --name billing --groups 'billing-*' --topics demo`,
	"admin oauth-client list":   `  capgate admin oauth-client list`,
	"admin oauth-client revoke": `  capgate admin oauth-client revoke CLIENT_ID`,
	"admin qos": `  capgate admin qos --group readme --max-bytes-per-sec 4000
  capgate admin qos --topic demo --partition 3 --log-level debug --ttl 10m
  capgate admin qos --group readme --clear log_level`,
	"admin qos list": `  capgate admin qos list -o table`,
	"completion": `  source <(capgate completion bash)
  capgate completion zsh > "${fpath[1]}/_capgate"`,
}

// addExamples sets the Example of every command examples names and
// has none of its own.
func addExamples(cmd *cobra.Command) {
	path := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
	if ex, ok := examples[path]; ok && cmd.Example == "" {
		cmd.Example = ex
	}
	for _, sub := range cmd.Commands() {
		addExamples(sub)
	}
}
