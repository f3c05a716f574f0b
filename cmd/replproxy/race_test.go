//go:build race

package main

// raceEnabled: the test binary, and so the proxy it runs as, is built with
// the race detector.
const raceEnabled = true
