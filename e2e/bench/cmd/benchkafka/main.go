// Command benchkafka is the deployment benchmark's Kafka: a kfake cluster
// of several brokers in its own process, so that neither the gateway nor
// the load generator shares a process with the broker. It creates the
// topics it is given, leads partition p of each on broker p mod brokers
// (kfake places leaders at random: a 3-partition topic often had two or
// all three on one broker, so a "one partition per broker" load was not,
// and differed from run to run), prints one JSON line {"addrs":["host:port",...]} on
// stdout once it listens, and runs until SIGTERM or SIGINT, or until its
// parent is gone (a benchmark killed midway leaves no broker behind).
//
//	benchkafka -brokers 3 -topics latency:3,bulk:3,idle:3
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capgate/capgate/broker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchkafka:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.Int("brokers", 3, "number of brokers")
	topicList := flag.String("topics", "", "topics to create, name:partitions,...")
	flag.Parse()
	topics, err := parseTopics(*topicList)
	if err != nil {
		return err
	}
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Brokers: *brokers, Topics: topics})
	if err != nil {
		return err
	}
	defer kafka.Close()
	for name, n := range topics {
		for p := range n {
			if err := kafka.Cluster().MoveTopicPartition(name, p, p%int32(*brokers)); err != nil {
				return fmt.Errorf("lead %s/%d on broker %d: %w", name, p, p%int32(*brokers), err)
			}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string][]string{"addrs": kafka.Addrs()}); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	parent := os.Getppid()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
			if os.Getppid() != parent {
				return nil
			}
		}
	}
}

func parseTopics(list string) (map[string]int32, error) {
	topics := map[string]int32{}
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		name, count, ok := strings.Cut(item, ":")
		n, err := strconv.ParseInt(count, 10, 32)
		if !ok || name == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("-topics: want name:partitions, got %q", item)
		}
		topics[name] = int32(n)
	}
	return topics, nil
}
