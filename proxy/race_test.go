//go:build race

package proxy

// retainedMemory is the memory the process keeps from the OS, as the Go
// runtime accounts it: under the race detector RSS also holds the
// detector's shadow memory, which follows the heap's peak and is never
// given back, so RSS says nothing about what the proxy returns.
func retainedMemory() int64 { return runtimeRetained() }
