//go:build !unix

package main

import "github.com/hashicorp/go-hclog"

// fileLimiter has nothing to ask where there is no RLIMIT_NOFILE.
func fileLimiter(hclog.Logger) func(int) int { return nil }
