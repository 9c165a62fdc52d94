//go:build !race

package coordinator_test

// raceDetector: the tests run under the race detector (5–10× slower).
const raceDetector = false
