//go:build !linux

package load

import "time"

// sleepUntil returns at or after at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
