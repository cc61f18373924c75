// Package chunk is the compressed sample-chunk codec. A chunk holds the
// samples of one series: timestamps (int64 milliseconds, strictly
// increasing) and float64 values. Chunks are written once and read many
// times, so Encode spends effort choosing, per chunk, the coding that
// gives the fewest bytes, and decoding is a few table lookups per sample.
//
// On sensor-like data (evenly spaced timestamps, decimal readings with one
// or two fractional digits that move by small steps) a chunk takes 0.3 to
// 0.45 bytes per sample at 120 samples and 0.2 to 0.3 at 1024, where the
// Gorilla paper's format takes 2.5 to 3 on the same data (TestCompression
// logs the comparison for every benchmark shape). Arbitrary float64 values
// (noise, NaN payloads, ±Inf, -0.0, subnormals) and arbitrary timestamps
// (jittery, irregular, negative, spanning the whole int64 range)
// round-trip bit for bit.
//
// # Concurrency
//
// Encode, Decode and Info are safe for concurrent use; Encode borrows
// pooled scratch memory and keeps nothing. An Iterator is not safe for
// concurrent use; any number of Iterators may read the same bytes. An
// Appender is not safe for concurrent use, reads included; the Sealed that
// its Seal returns is immutable and safe for concurrent use.
//
// # Layout
//
// A chunk starts with a byte-aligned header, then at most one timestamp
// stream and one value stream:
//
//	chunk    = first count minT [span [tsLen tsStream]] valueStream
//	first    = 1 byte: version (bits 7-5, 1) | regular (bit 4) | value encoding (bits 3-0)
//	count    = uvarint: n, the number of samples, 1 <= n <= MaxSamples
//	minT     = varint (zigzag): the first timestamp
//	span     = uvarint: maxT - minT, the last timestamp minus the first; iff n >= 2
//	tsLen    = uvarint: the bytes of tsStream; iff n >= 2 and not regular
//	tsStream = bit stream: the timestamps, as an integer stream
//	valueStream = bit stream to the end of the chunk: the values
//
// Varints are those of encoding/binary. A bit stream is read most
// significant bit first; a field of w bits is an unsigned big-endian
// number; a stream ends with fewer than 8 zero bits of padding to a byte
// boundary.
//
// Timestamps. With the regular flag, t[i] = minT + i*(span/(n-1)) and
// there is no timestamp stream; span must be a multiple of n-1. Otherwise
// tsStream is an integer stream for t with x[0] = minT and predicted first
// delta span/(n-1) (rounded down).
//
// Values, by value encoding:
//
//	0 raw       n × 64 bits: the IEEE 754 bits of each value
//	1 XOR       64 bits of v[0], then one XOR code per later value
//	2 decimal   e (4 bits, <= 15), varbits(zigzag(m[0])), then, iff n >= 2,
//	            an integer stream for m with predicted first delta 0;
//	            v[i] = float64(m[i]) / 10^e, computed exactly so
//	3 constant  64 bits: the value of every sample
//
// Encodings 4-15 are reserved and rejected.
//
// # Integer streams
//
// An integer stream codes x[1..n-1] given x[0] and a predicted first delta
// p:
//
//	flags     2 bits: bit 1 order2, bit 0 offset
//	base      varbits(zigzag(base)), iff offset
//	first     varbits(zigzag(x[1]-x[0]-p)), iff order2
//	table     a bucket code table
//	residuals one bucket code per residual, in order
//
// With d[i] = x[i]-x[i-1], the residuals are d[1..n-1] (order 1), or
// d[i]-d[i-1] for i = 2..n-1 (order 2, where d[1] comes from first). A
// residual r is coded as u = r - base (offset) or u = zigzag(r) = (r<<1) ^
// (r>>63) (otherwise). All of this arithmetic wraps modulo 2^64, so every
// int64 sequence has a stream, however far apart its values are.
//
// varbits(u) is a 7-bit length L <= 64, then u in L bits.
//
// # Bucket codes
//
// A table is k-1 in 3 bits, then k widths w[0..k-1] of 7 bits each, each
// <= 64. Bucket j holds the integers [lo[j], lo[j] + 2^w[j]), where lo[0] =
// 0 and lo[j+1] = lo[j] + 2^w[j]. An integer u in bucket j is written as j
// one bits, a zero bit unless j is the last bucket (k-1), then u - lo[j] in
// w[j] bits. One bucket of width 0 codes every residual in zero bits: a
// constant series or a series growing by a constant costs nothing per
// sample. Decoders accept any table (lo then wraps modulo 2^64); Encode
// writes ascending widths, so buckets never overlap or wrap.
//
// # XOR codes
//
// For each value after the first, x is its IEEE 754 bits XOR those of the
// previous value (Gorilla, Pelkonen et al., VLDB 2015):
//
//	0                           x == 0: the same value
//	10 bits                     x in the current window: its bits [lead, 64-trail)
//	11 lead(5) sig(6) bits      a new window: lead, and sig bits (0 means 64),
//	                            trail = 64-lead-sig; then x's sig bits
//
// The window starts as the whole 64 bits (lead = trail = 0).
//
// # How Encode chooses
//
// Timestamps: regular if evenly spaced, else the cheapest of three integer
// streams: order 1 offset (base the smallest delta), order 1 zigzag (only
// if some delta is negative; otherwise offset is never bigger) and order 2
// zigzag. Values: decimal applies if one exponent e <= 15 makes every value
// exactly float64(m)/10^e with |m| < 2^53 (NaN, ±Inf and -0.0 never do);
// its integer stream is chosen like the timestamps'. Constant applies if
// every value has the same bits. The smallest of raw, XOR, decimal and
// constant wins. XOR is considered only when a lower bound of its size
// (1 bit per repeat, 2 plus the significant bits per change) could win;
// when only raw remains to beat, it is written, and replaced by raw if
// bigger.
//
// For each candidate stream, Encode picks the bucket table from a
// histogram of the residuals (exact counts below 16, counts by bit length
// above): it searches every set of buckets of width <= 4 exactly, and
// extends them with wider buckets whose widths are bit lengths present.
//
// # Appender streams
//
// The storage node's head builds each open chunk with an Appender, one
// sample at a time, and answers queries from it; when the chunk is done,
// it is re-encoded with Encode. This coding lives only in memory: it is
// not a storage or wire format, is never persisted, and may change
// between versions without notice. There is no header: the Appender (and
// the Sealed that Seal makes of it) keeps the sample count and the first
// and last timestamps beside the bits, which fill 64-bit words most
// significant bit first, the last word padded with zeros.
//
//	stream = valueCode (tsCode valueCode)*   one valueCode per sample
//
// A tsCode is a bucket code (see "Bucket codes") for zigzag(dod), where
// dod = (t[i]-t[i-1]) - (t[i-1]-t[i-2]), the delta before the first being
// 0, all modulo 2^64; the bucket widths are fixed at 0, 4, 7, 12, 20 and
// 64. Evenly spaced timestamps take one bit each.
//
// Values are coded in one of two modes. Decimal mode keeps an exponent e
// and the mantissa m of the last decimal-coded value, both 0 before the
// first. A value v that is float64(m')/10^e exactly, with |m'| < 2^53 (as
// for chunk decimals), is a bucket code for zigzag(m'-m) with widths 0,
// 1, 3, 6, 10, 16 and 55, whose eighth prefix, seven one bits, is an
// escape instead:
//
//	escape 1 e'(4 bits) code   a raise: m *= 10^(e'-e) and e = e', then
//	                           the value's bucket code at the new exponent
//	escape 0 xorCode           an exception: m and e stay
//
// In XOR mode each value is an xorCode. XOR codes are those of chunks
// (see "XOR codes"), against the value before whatever its coding (+0.0
// before the first), with one window for the whole stream, which starts
// as all 64 bits.
//
// The writer raises the exponent when that makes the value a decimal,
// by at most 3 unless m is 0, and keeping |m| below 2^53; otherwise it
// codes an exception. The modes switch by rules that the reader follows
// too: two exceptions in a row switch to XOR mode for 64 values, and each
// later XOR run is twice the one before, up to 32768. Back in decimal
// mode, an exception before the next decimal-coded value switches at once.
//
// A sensor series (evenly spaced, one decimal moving by a step or less)
// takes about 3 bits per sample; noise takes what Gorilla's XOR takes.
//
// # Corrupt input
//
// Decode, Iterator and Info never panic and return errors wrapping
// ErrCorrupt. Info checks the header only; Decode and Iterator check
// everything:
//
//   - the header: version, value encoding, count in [1, MaxSamples],
//     varints, span at least n-1 and minT+span within int64, the regular
//     flag only with n >= 2 and span a multiple of n-1;
//   - stream parameters: tsLen within the chunk, table widths <= 64,
//     varbits lengths <= 64, the decimal exponent <= 15;
//   - before allocating: each stream holds at least n times its cheapest
//     code (only MaxSamples bounds a stream whose codes cost zero bits);
//   - while decoding: no stream read past its end, XOR windows within 64
//     bits, timestamps strictly increasing, the last one equal to
//     minT+span;
//   - at the end: each stream fully read but for its zero padding, and no
//     bytes after the value stream.
//
// There is no checksum: whoever stores chunks checksums their bytes. The
// checks above keep a damaged chunk from decoding into samples that break
// the invariants readers rely on.
package chunk
