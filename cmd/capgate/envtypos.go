package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/capgate/capgate/config"
)

// A CAPGATE_* variable the CLI does not read was ignored without a word:
// CAPGATE_GATEWAY_URL=https://gw:8080 (the list's name is _URLS) sent
// consume to the default 127.0.0.1:8080, and CAPGATE_TOKEN left "no
// admin_token" unexplained (newuser9). `capgate coordinator|gateway`
// refuse such a variable (config.ApplyEnv: it may be a setting's typo);
// the other commands warn on stderr, once per variable, naming the
// variable it may have meant, and go on — a setting's variable (exported
// for a coordinator in the same shell) is no typo and is not warned of.

// warnUnknownVariables warns on w of every CAPGATE_* variable in env
// that is neither the CLI's nor a setting's.
func warnUnknownVariables(w io.Writer, env []string) {
	settings := config.EnvNames(new(fileConfig))
	for _, kv := range slices.Sorted(slices.Values(env)) {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.EnvPrefix) || cliVariables[name] || slices.Contains(settings, name) ||
			strings.HasPrefix(name, "CAPGATE_E2E_") || strings.HasPrefix(name, "CAPGATE_BENCH_") { // the tests' own
			continue
		}
		msg := fmt.Sprintf("capgate: warning: %s is set, but capgate reads no such variable: it is ignored", name)
		if meant := meantVariable(name); meant != "" {
			msg += fmt.Sprintf("; did you mean %s?", meant)
		}
		fmt.Fprintln(w, msg+" (capgate help environment lists them)")
	}
}

// meantVariable is the CLI's variable name is most likely a typo of: one
// at most two edits away (CAPGATE_GATEWAY_URL), one it is the start of
// (CAPGATE_COORDINATOR) or one ending in its last word (CAPGATE_TOKEN →
// CAPGATE_ADMIN_TOKEN); "" when none or several are.
func meantVariable(name string) string {
	var near, partial []string
	tail := name[strings.LastIndex(name, "_"):]
	for _, known := range slices.Sorted(maps.Keys(cliVariables)) {
		switch {
		case config.EditDistance(name, known) <= 2:
			near = append(near, known)
		case strings.HasPrefix(known, name+"_"), strings.HasSuffix(known, tail):
			partial = append(partial, known)
		}
	}
	if len(near) == 1 {
		return near[0]
	}
	if len(near) == 0 && len(partial) == 1 {
		return partial[0]
	}
	return ""
}
