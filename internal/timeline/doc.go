// Package timeline holds the one definition of a pause (Pause) and the
// analysis of a rebalance run built on it (Analyze): which partitions
// moved, how long each paused, how much of that is beyond its holder's
// steady state, how long until the group was stable again, and what was
// lost or delivered twice. `capgate dev --demo`, the end-to-end suites
// and the benchmarks all measure with it, so README.md and BENCHMARKS.md
// mean the same thing by "pause".
//
// It is pure: times come in as data (a Recorder collects them as they
// happen; Timeline is a copy), nothing here reads a clock or does IO.
// Recorder is safe for concurrent use; the rest are functions of values.
package timeline
