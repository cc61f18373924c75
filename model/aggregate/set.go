package aggregate

// Intersect appends to dst the ids that are in both a and b, which are
// sorted and without duplicates, and returns it. dst may be a[:0] (the
// result never overtakes the reading of a), but must share no memory with
// b.
func Intersect(dst, a, b []uint64) []uint64 {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	return dst
}

// Subtract appends to dst the ids of a that are not in b, both sorted and
// without duplicates, and returns it. dst may be a[:0], but must share no
// memory with b.
func Subtract(dst, a, b []uint64) []uint64 {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		dst = append(dst, x)
	}
	return dst
}
