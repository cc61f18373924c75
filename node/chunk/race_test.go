//go:build race

package chunk

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// allocation counts mean nothing.
const raceEnabled = true
