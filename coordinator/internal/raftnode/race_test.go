//go:build race

package raftnode_test

// raceEnabled shrinks the simulation under the race detector, which slows
// it several times over.
const raceEnabled = true
