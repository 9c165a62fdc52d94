package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
)

// listenInUse adds to a server command's error what to do when one of
// its listen addresses is taken (EADDRINUSE): which setting names it, and
// that another process — often a capgate dev or a second coordinator or
// gateway — holds it. The error said only "bind: address already in use"
// (capgate dev says what to do: dev.go).
func listenInUse(err error, cfg fileConfig, section, path string) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) || op.Addr == nil {
		return err
	}
	addr := op.Addr.String()
	where := "in " + path
	if path == "" {
		where = "(--config FILE, or its CAPGATE_* variable)"
	}
	setting := "the setting that names it"
	if names := settingsNaming(addr, listenSettings(cfg, section)); len(names) > 0 {
		setting = strings.Join(names, " or ")
	}
	return fmt.Errorf("%w\n(another process already listens at %s — a capgate dev, or another %s? stop it, or give %s another address %s)",
		err, addr, section, setting, where)
}

// listenSettings are a section's listen addresses by setting name.
func listenSettings(cfg fileConfig, section string) map[string]string {
	if section == "coordinator" {
		return map[string]string{"coordinator.listen": cfg.Coordinator.Listen}
	}
	return map[string]string{"gateway.listen": cfg.Gateway.Listen, "gateway.kafka_listen": cfg.Gateway.KafkaListen,
		"gateway.pprof_listen": cfg.Gateway.PprofListen}
}

// settingsNaming are the settings whose address is addr (a wildcard host
// — empty, 0.0.0.0, :: — matches any at its port), sorted.
func settingsNaming(addr string, settings map[string]string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	var out []string
	for name, value := range settings {
		h, p, err := net.SplitHostPort(value)
		if err != nil || p != port {
			continue
		}
		if h == host || h == "" || h == "0.0.0.0" || h == "::" || host == "0.0.0.0" || host == "::" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
