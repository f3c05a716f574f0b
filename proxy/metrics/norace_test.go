//go:build !race

package metrics

// raceDetector reports whether the tests run under the race detector,
// which makes every Go instruction cost several times over.
const raceDetector = false
