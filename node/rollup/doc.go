// Package rollup holds the pre-aggregate kept per series per hour and per
// day: count, sum, min, max, first and last, plus the timestamps of first
// and last so that two aggregates of disjoint sample sets merge exactly.
//
// Merge is exact for count, min, max, first and last; sum (and so avg) is a
// float64 sum whose rounding depends on the order of additions, so a rollup
// sum equals the raw sum up to floating-point rounding (relative 1e-12 for
// sensor-scale data).
//
// Agg, Hourly and Daily are plain values; they are not safe for concurrent
// mutation. The encoders and decoders keep no state.
//
// # Single aggregate
//
// One Agg, relative to the start of its bucket (Agg.AppendBinary, Decode):
//
//	uvarint count
//	varint  firstT - bucketStart    (ms)
//	varint  lastT  - firstT         (ms)
//	8 bytes sum    (float64, little-endian IEEE-754 bits)
//	8 bytes min
//	8 bytes max
//	8 bytes first
//	8 bytes last
//
// A value whose count is 0 is never written.
//
// # Packs
//
// Queries read rollups in bulk, so they are stored packed: Hourly holds the
// 24 hours of one series for one UTC day, Daily the 32 days of one series
// for one epoch-aligned DailySpan (PackStart). Both use one layout that
// differs only in the number of slots n and the slot width w; slot i covers
// [start + i·w, start + (i+1)·w), where start is the day (Hourly) or the
// pack start (Daily), which the reader knows from the key and the encoding
// does not hold.
//
//	byte        format         1: Hourly (n = 24, w = Hour)
//	                           2: Daily  (n = 32, w = Day)
//	n/8 bytes   mask           little-endian (3 bytes Hourly, 4 Daily); bit i
//	                           set: slot i has samples; bits n and up are 0
//
// If the mask is 0 the value ends there. Otherwise eight columns follow,
// each holding one entry per set mask bit, in slot order (k entries):
//
//	int column    count                  ≥ 1
//	int column    firstT - slot start    in [0, w)
//	int column    lastT - firstT         ≥ 0, and lastT < slot start + w
//	float column  sum
//	float column  min
//	float column  max
//	float column  first
//	float column  last
//
// Columns rather than rows put like values side by side: sensor counts and
// sample offsets repeat from slot to slot and values drift slowly, so most
// entries shrink to a byte.
//
// An int column of entries x_0 … x_(k-1), all int64; "varint" is the zigzag
// varint of encoding/binary, and differences wrap in two's complement, so
// every int64 survives:
//
//	byte  kind
//	kind 0 (delta): k × varint x_j - x_(j-1), with x_(-1) = 0
//	kind 1 (plain): k × varint x_j
//	kind 2 (const): 1 × varint x_0; every entry equals x_0
//
// A float column of entries v_0 … v_(k-1); bits(v) is the IEEE-754 bit
// pattern as a uint64, and the high nibble of the kind byte is the scheme,
// the low nibble a decimal exponent e:
//
//	byte  kind
//	0x00 (xor):       k entries, x_j = bits(v_j) XOR bits(v_(j-1)), with
//	                  bits(v_(-1)) = 0, each written as
//	                    byte     t<<4 | c: c bytes are left after dropping
//	                             the t trailing and the leading zero bytes
//	                             of x_j; c + t ≤ 8, and x_j = 0 is 0x00
//	                    c bytes  x_j >> 8t, little-endian
//	0x1e (decimal):   int column m_j; v_j = float64(m_j) / 10^e
//	0x2e (decimal     int column m_j, then int column r_j;
//	     plus ulps):  bits(v_j) = bits(float64(m_j) / 10^e) + r_j (wrapping)
//
// with e ≤ 15: 10^e is an exact float64, and IEEE-754 division rounds the
// same everywhere, so every decoder computes the same bits. Every scheme
// holds every float64 exactly.
//
// The encoder chooses each column's kind; a decoder accepts every kind in
// every column. For an int column the encoder takes the shortest of const
// (only when every entry is equal), delta and plain. For a float column it
// takes the shortest of
//
//   - xor;
//   - decimal at the smallest e for which every v_j is finite, |v_j·10^e| <
//     2^53, and m_j, v_j·10^e rounded to an integer, gives
//     float64(m_j)/10^e = v_j bit for bit;
//   - decimal plus ulps at the e (below that one, if any) with the shortest
//     column, searching e = 0, 1, … and stopping once the column stops
//     shrinking, since past the point where the ulps are down to the
//     rounding error of the values a larger e only lengthens the mantissas.
//
// Sensor readings with a few fractional digits take the decimal scheme with
// a byte or two per entry; their sums, which carry the rounding error of
// float64 addition, take decimal plus ulps with about one byte of ulps per
// entry; everything else (NaN payloads, infinities and -0 included) falls
// back to xor or, for values near a decimal, to decimal plus ulps.
//
// Decoding checks every length, kind, count and time, and rejects trailing
// bytes; it returns ErrCorrupt instead of panicking.
package rollup
