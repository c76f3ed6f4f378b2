//go:build race

package mvcc

// raceEnabled: the race detector slows the engine ten-fold; randomized
// tests run fewer seeds under it (the full count runs without it).
const raceEnabled = true
