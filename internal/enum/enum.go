// Package enum names the values of the project's small integer
// enumerations (roles, states, reasons, command kinds) from a table, so
// that each String method is one line and every one of them treats a
// value without a name the same way.
//
// It keeps no state and is safe for concurrent use.
package enum

import "fmt"

// Integer is the underlying type of an enumeration.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Name returns names[v], or "kind(v)" when v is outside names or its
// entry is "" (a value without a name, such as a zero that is not a
// valid value). Build names with the constants as indexes:
//
//	[]string{RoleEdge: "edge", RoleCoordinator: "coordinator"}
func Name[T Integer](names []string, v T, kind string) string {
	if v >= 0 && uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}
