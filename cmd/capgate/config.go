package main

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// fileConfig is the layout of config.example.yaml: each process reads its
// own section plus log.
type fileConfig struct {
	Log         logConfig          `yaml:"log"`
	Coordinator coordinator.Config `yaml:"coordinator"`
	Gateway     gateway.Config     `yaml:"gateway"`
}

type logConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// RetiredSettings lists the settings that are gone, with what replaced
// them, so an old file gets a clear error (config.Retired).
func (fileConfig) RetiredSettings() map[string]string {
	out := map[string]string{}
	for section, retired := range map[string]map[string]string{
		"coordinator": coordinator.RetiredSettings(), "gateway": gateway.RetiredSettings(),
	} {
		for path, why := range retired {
			out[section+"."+path] = why
		}
	}
	return out
}

func defaultFileConfig() fileConfig {
	return fileConfig{
		Log:         logConfig{Level: "info", Format: "json"},
		Coordinator: coordinator.DefaultConfig(),
		Gateway:     gateway.DefaultConfig(),
	}
}

func (l logConfig) validate() error {
	if _, err := zapcore.ParseLevel(l.Level); err != nil {
		return fmt.Errorf("log.level: want debug, info, warn or error, got %q", l.Level)
	}
	if l.Format != "json" && l.Format != "console" {
		return fmt.Errorf("log.format: want json or console, got %q", l.Format)
	}
	return nil
}

// cliVariables are CAPGATE_* variables the CLI reads itself, and every
// one capgate dev writes into credentials.env (credentialsEnvVariables,
// the list its writer checks against); the config loader must not take
// them for unknown settings.
var cliVariables = func() map[string]bool {
	m := map[string]bool{"CAPGATE_CAPABILITY": true, "CAPGATE_CERT": true, "CAPGATE_KEY": true}
	for _, name := range credentialsEnvVariables {
		m[name] = true
	}
	return m
}()

func configEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !cliVariables[k] {
			env = append(env, kv)
		}
	}
	return env
}

// loadConfig reads path (may be "") and the environment; section names
// which process validates its part.
func loadConfig(path, section string) (fileConfig, error) {
	cfg := defaultFileConfig()
	if err := config.Load(path, configEnv(), &cfg); err != nil {
		return cfg, err
	}
	if err := cfg.Log.validate(); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := sectionPresent(path, section); err != nil {
		return cfg, err
	}
	var err error
	switch section {
	case "coordinator":
		err = cfg.Coordinator.Validate()
	case "gateway":
		err = cfg.Gateway.Validate()
	}
	if err != nil {
		return cfg, fmt.Errorf("config: %s: %w", section, err)
	}
	return cfg, nil
}

// sectionPresent refuses a config file that has the other process's
// section but not section: `capgate coordinator --config gateway.yaml`
// ran on the coordinator's defaults and said nothing (newuser8's left).
// A file of neither (only log:, or empty) is the defaults on purpose, and
// so is the other's file when CAPGATE_<SECTION>_* variables configure
// section: a gateway set up wholly by variables on a host whose shared
// /etc/capgate/capgate.yaml holds the coordinator's section was refused
// (review22's low, carried since).
func sectionPresent(path, section string) error {
	other := map[string]string{"coordinator": "gateway", "gateway": "coordinator"}[section]
	if path == "" || other == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var top map[string]any
	if yaml.Unmarshal(b, &top) != nil {
		return nil // config.Load reported it already
	}
	if _, ok := top[section]; ok {
		return nil
	}
	if _, ok := top[other]; !ok {
		return nil
	}
	prefix := config.EnvPrefix + strings.ToUpper(section) + "_"
	for _, kv := range configEnv() {
		if strings.HasPrefix(kv, prefix) {
			return nil // Load took it for a setting of section
		}
	}
	return fmt.Errorf("config: %s has a %s: section and no %s: section — capgate %s reads the settings under %s: (was this the %s's file? one file may hold both sections; or set them with %s* variables)",
		path, other, section, section, section, other, prefix)
}

func newLogger(l logConfig) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	if l.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.Encoding = safeConsoleEncoding // terminal.go
		if isTerminal(os.Stderr) {
			zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.DisableStacktrace = true
	return zc.Build()
}
