//go:build !race

package proxy

import "github.com/replproxy/replproxy/proxy/sysmem"

// retainedMemory is the memory the process keeps from the OS: its RSS.
func retainedMemory() int64 { return sysmem.RSS() }
