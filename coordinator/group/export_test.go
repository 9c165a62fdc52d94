package group

import "github.com/capgate/capgate/coordinator/assign"

// SetAssignorLookup replaces how machines created from now on resolve
// assignor names and returns a function restoring the default.
func SetAssignorLookup(f func(string) (assign.Func, bool)) (restore func()) {
	old := assignorLookup
	assignorLookup = f
	return func() { assignorLookup = old }
}

// StateBytes is the machine's estimate of its member, group and
// partition state.
func (m *Machine) StateBytes() int64 { return m.tally.bytes() }

// PartitionBytes is the estimate of one partition.
func PartitionBytes() int64 { return partitionBytes }

// PatternSteps is the topicpattern steps the machine's own matching took.
func (m *Machine) PatternSteps() int64 { return m.patternSteps }
