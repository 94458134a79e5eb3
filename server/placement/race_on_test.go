//go:build race

package placement

// raceEnabled scales randomized tests down under the race detector.
const raceEnabled = true
