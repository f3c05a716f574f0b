//go:build !race

package proxy

// retainedMemory is the memory the process keeps from the OS: its RSS.
func retainedMemory() int64 { return rssBytes() }
