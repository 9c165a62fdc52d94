//go:build !unix

package connguard

// DescriptorLimit is unknown here.
func DescriptorLimit() (uint64, bool) { return 0, false }
