package assign

// Sticky keeps current owners and moves the fewest partitions needed to
// reach floor/ceil balance. TODO(assign helper): implement.
func Sticky(in Input) Assignment { panic("not implemented") }

// Range assigns each topic's partitions in contiguous ranges, Kafka style.
// TODO(assign helper): implement.
func Range(in Input) Assignment { panic("not implemented") }
