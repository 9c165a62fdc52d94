package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// foreignFlags are flags of kafka-console-consumer/-producer and kcat
// that consume and produce do not take (kcat's and rpk's that mean the
// same are declared as short flags), with what to use instead: a Kafka
// user's first try was refused "unknown flag: --from-beginning" and no
// more (newuser4 #13); and kafka-consumer-groups' on the admin commands
// that do its work (newuser5: `admin offsets reset G demo --to-earliest`).
// Keyed by command path without "capgate ", then by the flag as cobra
// names it ("--from-beginning", "-p").
var foreignFlags = map[string]map[string]string{
	"consume": {
		"--from-beginning":   "capgate consume takes -o start (--offset start): where partitions the group has no committed offset for start, as auto.offset.reset=earliest",
		"--bootstrap-server": bootstrapHint("consume reads"),
		"--broker-list":      bootstrapHint("consume reads"),
		"-b":                 bootstrapHint("consume reads"),
		"-p":                 partitionHint,
		"--partition":        partitionHint,
		"-e":                 "capgate consume takes --idle-exit 1s (exit after that long without a record; kcat's -e exits at the end of the partitions)",
		"--max-messages":     maxRecordsHint,
		"-c":                 maxRecordsHint,
		"-C":                 "capgate consume is kcat's -C mode already: drop it",
		"-G":                 "capgate consume is a group consumer already (kcat's -G): -g GROUP -t TOPIC",
		"-J":                 "capgate consume takes -f json (one JSON object per record, as kcat's -J envelope)",
		"-K":                 "capgate consume prints the key in its own column (-f text), or place it with a kcat format string: -f '%k\\t%s\\n'",
		"-X":                 librdkafkaHint,
		"-F":                 librdkafkaHint,
	},
	"produce": {
		"--bootstrap-server": bootstrapHint("produce writes"),
		"--broker-list":      bootstrapHint("produce writes"),
		"-b":                 bootstrapHint("produce writes"),
		"-P":                 "capgate produce is kcat's -P mode already: drop it",
		"-X":                 librdkafkaHint,
		"-F":                 librdkafkaHint,
		"--property":         "capgate produce takes -K SEP (--key-separator) to split each line into key and value, as parse.key=true with key.separator",
	},
	"admin offsets reset": {
		"--to-earliest":   "capgate admin offsets reset takes --to earliest",
		"--to-latest":     "capgate admin offsets reset takes --to latest",
		"--to-offset":     "capgate admin offsets reset takes --to OFFSET",
		"--shift-by":      "capgate admin offsets reset takes --to OFFSET (capgate admin offsets GROUP shows the committed ones)",
		"--to-datetime":   "capgate admin offsets reset takes --to earliest, latest or an offset; no time",
		"--execute":       "capgate admin offsets reset acts at once, there is no dry run: drop --execute (capgate admin offsets GROUP shows the committed offsets)",
		"--dry-run":       "capgate admin offsets reset has no dry run: capgate admin offsets GROUP shows the committed offsets, capgate admin topic TOPIC where the logs start and end",
		"--reset-offsets": "capgate admin offsets reset is kafka-consumer-groups' --reset-offsets already: drop it",
		"--group":         "GROUP is an argument: capgate admin offsets reset GROUP TOPIC [PARTITION] --to earliest|latest|OFFSET",
		"--topic":         "TOPIC is an argument: capgate admin offsets reset GROUP TOPIC [PARTITION] --to earliest|latest|OFFSET",
		"--all-topics":    "name each TOPIC: capgate admin offsets reset GROUP TOPIC --to earliest|latest|OFFSET",
	},
	"admin group": {
		"--describe": "capgate admin group GROUP describes it (kafka-consumer-groups --describe): drop --describe",
		"--group":    "GROUP is an argument: capgate admin group GROUP",
	},
	"admin groups": {
		"--list": "capgate admin groups lists them (kafka-consumer-groups --list): drop --list",
	},
}

const (
	partitionHint  = "a group consumer reads the partitions the coordinator grants it; to read one partition, grant a capability (capgate admin grant --topic T --partition P --holder NAME) and read with it: kcat -p through the Kafka listener, or GET /v1/topics/T/partitions/P/records"
	maxRecordsHint = "capgate consume takes -n N (--max-records)"
	librdkafkaHint = "capgate takes no librdkafka properties: TLS is --cacert/--cert/--key, the credential --credential-file (or $CAPGATE_CREDENTIAL), the servers --coordinator and --gateways; kcat itself, with -X and -F, reads through the gateway's Kafka listener: -b $CAPGATE_KAFKA_BOOTSTRAP"
)

func bootstrapHint(what string) string {
	return "capgate " + what + " through the gateways, not Kafka's brokers: --gateways URL and --coordinator URL (capgate dev's credentials.env sets both); Kafka clients such as kcat take the gateway's Kafka listener: -b $CAPGATE_KAFKA_BOOTSTRAP"
}

// foreignFlagHint adds what to use instead to cobra's refusal of a flag
// that foreignFlags knows for c.
func foreignFlagHint(c *cobra.Command, err error) error {
	msg := err.Error()
	var flag string
	switch {
	case strings.HasPrefix(msg, "unknown flag: "):
		flag = strings.TrimPrefix(msg, "unknown flag: ")
	case strings.HasPrefix(msg, "unknown shorthand flag: '") && len(msg) > len("unknown shorthand flag: 'x'"):
		flag = "-" + msg[len("unknown shorthand flag: '"):len("unknown shorthand flag: 'x")]
	default:
		return err
	}
	if hint, ok := foreignFlags[strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")][flag]; ok {
		return fmt.Errorf("%w — %s", err, hint)
	}
	return err
}
