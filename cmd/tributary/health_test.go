package main

import "testing"

func TestNodeReady_OfNoNodeFails(t *testing.T) {
	if nodeReady(nil)() == nil || nodeWriteReady(nil)() == nil {
		t.Fatal("the checks of a node not open passed")
	}
}
