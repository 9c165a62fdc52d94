// Package config loads capgate's YAML configuration: defaults first, then
// the file (unknown keys refused), then CAPGATE_* environment variables,
// then validation. Errors name the offending field by its YAML path and
// the bad value; a file's unknown keys (with the closest known one) and
// values of the wrong type also by their line (check.go).
//
// The environment variable for a setting is CAPGATE_ followed by its YAML
// path in upper case with "." and "_" both written as "_": gateway.sync_timeout
// is CAPGATE_GATEWAY_SYNC_TIMEOUT. Lists are comma-separated.
//
// Load is safe for concurrent use on different destinations.
package config
