package influx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Options configure a Parser. The zero value of a field means its default.
type Options struct {
	// Limits bound the series the parser builds; a line whose series would
	// break them is refused with a line error. They should equal the
	// node's limits. Default labels.DefaultLimits.
	Limits labels.Limits
	// MaxPoints makes Parse stop with ErrTooManyPoints before a body
	// yields more points than this. 0 means no limit.
	MaxPoints int
	// MaxSeries makes Parse stop with ErrTooManySeries before a body
	// yields more distinct series than this, or more distinct series keys
	// (measurement and tag set, also of refused lines). 0 means no limit.
	MaxSeries int
	// MaxLineBytes bounds one line (without its line break); a longer
	// line is refused without being parsed, and ParseReader never holds
	// more of it than this. Comment lines are skipped whatever their
	// length. Default httpapi.DefaultMaxLineBytes (256 KiB).
	MaxLineBytes int
	// MaxFieldsPerLine bounds the fields of one line; a line with more is
	// refused before any of its fields is parsed. Default
	// httpapi.DefaultMaxFieldsPerLine (1,000).
	MaxFieldsPerLine int
	// MaxErrors bounds the line errors Parse describes in Result.Errors;
	// the counts in Result are always complete. Default 100.
	MaxErrors int
	// MaxCacheBytes bounds (approximately) the memory the series cache
	// keeps from one call to the next; past it the cache is emptied.
	// Default 8 MiB.
	MaxCacheBytes int64
	// RefuseStringFields refuses a line with a string field whole (400),
	// as earlier versions did. Default false: its string fields are
	// skipped and counted (Result.SkippedStringFields) and its numeric and
	// boolean fields stored, as VictoriaMetrics does.
	RefuseStringFields bool
	// RetainPoints: buffers sized for more points than this are let go
	// after a call (or by Release) rather than kept for the next one.
	// Default 65,536.
	RetainPoints int
}

// Defaults for Options.
const (
	DefaultMaxErrors     = 100
	DefaultMaxCacheBytes = 8 << 20
	DefaultRetainPoints  = 1 << 16
)

// Validate fills in the defaults of the zero fields (see each field); no
// value is refused.
func (o *Options) Validate() error {
	if o.Limits == (labels.Limits{}) {
		o.Limits = labels.DefaultLimits
	}
	o.MaxErrors = httpapi.PositiveOr(o.MaxErrors, DefaultMaxErrors)
	o.MaxCacheBytes = httpapi.PositiveOr(o.MaxCacheBytes, DefaultMaxCacheBytes)
	o.RetainPoints = httpapi.PositiveOr(o.RetainPoints, DefaultRetainPoints)
	o.MaxLineBytes = httpapi.PositiveOr(o.MaxLineBytes, httpapi.DefaultMaxLineBytes)
	o.MaxFieldsPerLine = httpapi.PositiveOr(o.MaxFieldsPerLine, httpapi.DefaultMaxFieldsPerLine)
	return nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// ErrTooManyPoints is returned (wrapped) by Parse when a body holds more
// points than Options.MaxPoints.
var ErrTooManyPoints = errors.New("too many points")

// ErrTooManySeries is returned (wrapped) by Parse when a body holds more
// series than Options.MaxSeries.
var ErrTooManySeries = errors.New("too many series")

// ErrBadDatabase is returned (wrapped) by Parse when the database name
// cannot be a label value.
var ErrBadDatabase = errors.New("invalid database name")

// LineError describes a line that Parse refused.
type LineError struct {
	Line   int    // 1-based line number in the body
	Column int    // 1-based byte column of the problem in that line
	Msg    string // what is wrong
}

func (e LineError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// Result is what Parse made of a body. It and every slice in it belong to
// the Parser and are valid until its next Parse or Release call; the label
// slices of Batches are shared with the parser's cache and must not be
// modified.
type Result struct {
	// Batches holds one batch per series, in the order each series first
	// appears, its points in line order.
	Batches []model.Batch
	// Errors describes the first refused lines, in line order.
	Errors []LineError
	// Lines counts the lines that hold a point (blank lines and comments
	// are not counted); RejectedLines counts those refused.
	Lines, RejectedLines int
	// Points counts the points in Batches; RejectedPoints counts the fields
	// of refused lines (at least one per line, whatever could be read of
	// its field set).
	Points, RejectedPoints int
	// SkippedStringFields counts the string fields of stored lines, not
	// stored (Options.RefuseStringFields off); SkippedStringLines counts
	// the lines that had one.
	SkippedStringFields, SkippedStringLines int

	offs  []int32 // per batch, where its line numbers start in lines
	lines []int32
}

// Line returns the line number of point i of batch b.
func (r *Result) Line(b, i int) int { return int(r.lines[int(r.offs[b])+i]) }

// Parser turns line protocol into batches (model.Batch). It keeps a cache from
// series keys (measurement and tag set, as written) to label sets across
// calls, so the tags of a series already seen are not parsed again.
//
// A Parser is not safe for concurrent use; reuse one per goroutine.
type Parser struct {
	opts Options

	// The cache: per database, raw series key -> entry; and every series
	// (one per field) by the hash of its canonical key, so that two
	// spellings of one series share one batch.
	dbs        map[string]map[string]*keyEntry
	series     map[uint64][]*seriesRef
	cacheBytes int64

	// Per call.
	gen     uint64
	keys    map[string]*keyEntry // p.dbs[db]
	db      string
	prev    *keyEntry // entry of the previous line, a cheap first guess
	pts     pendingList
	refs    []*seriesRef // batch index -> series
	counts  []int32
	tsBuf   []int64
	vsBuf   []float64
	lineBuf []int32
	res     Result
	le      lineErr
	scratch []byte
	nameBuf []byte
	tagPos  []int // byte column of each tag while building an entry
	tags    []labels.Label
	lsetBuf []labels.Label // a field's label set before it is known new

	lineNo   int32  // the line being parsed
	keysUsed int    // distinct series keys of this call (keyEntry.gen)
	abort    error  // a request-wide limit was broken: the call fails
	rbuf     []byte // ParseReader's buffer
}

// keyEntry is a cached series key: the sanitized measurement and the
// sorted tags (with the db label), and one fieldEntry per field seen.
type keyEntry struct {
	gen         uint64 // the call that last used the entry
	key         string
	measurement string
	tags        []labels.Label
	fields      []fieldEntry
	fieldIndex  map[string]int32 // built once fields grow past linearFields
}

const linearFields = 16

type fieldEntry struct {
	raw string // the field key as written
	ref *seriesRef
}

// seriesRef is one series; batch is its batch index in the call gen.
type seriesRef struct {
	lset  []labels.Label
	gen   uint64
	batch int32
}

// pending is one parsed point before the points are grouped by series.
type pending struct {
	ts    int64
	v     float64
	batch int32
	line  int32
}

// pendingList holds the points of a call in blocks that are never moved:
// growing it allocates each point's 24 bytes once (blocks double from 256
// to 8,192 points), where append's growth would allocate up to five
// times that in all, and copy it.
type pendingList struct {
	blocks [][]pending // all full but the last; blocks[k] holds up to blockCap(k)
	n      int
	spare  [][]pending // emptied blocks kept for reuse
}

func blockCap(k int) int { return 256 << min(k, 5) }

func (l *pendingList) len() int { return l.n }

func (l *pendingList) push(pt pending) {
	last := len(l.blocks) - 1
	if last < 0 || len(l.blocks[last]) == cap(l.blocks[last]) {
		k := len(l.blocks)
		var blk []pending
		if k < len(l.spare) && l.spare[k] != nil {
			blk = l.spare[k][:0]
		} else {
			blk = make([]pending, 0, blockCap(k))
		}
		l.blocks = append(l.blocks, blk)
		last = k
	}
	l.blocks[last] = append(l.blocks[last], pt)
	l.n++
}

// truncate keeps the first n points.
func (l *pendingList) truncate(n int) {
	for l.n > n {
		last := len(l.blocks) - 1
		blk := l.blocks[last]
		drop := min(len(blk), l.n-n)
		l.blocks[last] = blk[:len(blk)-drop]
		l.n -= drop
		if len(l.blocks[last]) == 0 {
			for len(l.spare) <= last {
				l.spare = append(l.spare, nil)
			}
			l.spare[last] = l.blocks[last]
			l.blocks[last] = nil
			l.blocks = l.blocks[:last]
		}
	}
}

// setTimestamps gives ts to the points from index from on.
func (l *pendingList) setTimestamps(from int, ts int64) {
	start := l.n
	for k := len(l.blocks) - 1; k >= 0 && start > from; k-- {
		blk := l.blocks[k]
		start -= len(blk)
		for i := max(from-start, 0); i < len(blk); i++ {
			blk[i].ts = ts
		}
	}
}

// release empties the list, and lets go of its blocks when they held
// more than retain points.
func (l *pendingList) release(retain int) {
	if l.n > retain {
		*l = pendingList{}
		return
	}
	l.truncate(0)
}

// lineErr is the first problem found on the line being parsed.
type lineErr struct {
	set bool
	col int
	msg string
}

// NewParser returns a Parser with opts (zero fields take their defaults).
func NewParser(opts Options) *Parser {
	_ = opts.Validate() // it refuses nothing
	p := &Parser{opts: opts}
	p.resetCache()
	return p
}

func (p *Parser) resetCache() {
	p.dbs = map[string]map[string]*keyEntry{}
	p.series = map[uint64][]*seriesRef{}
	p.cacheBytes = 0
	p.keys = nil
	p.prev = nil
}

// Parse parses body, a series of lines of line protocol, with timestamps
// in precision prec; lines without a timestamp get defaultMs (milliseconds
// since the epoch). Every point gets the label db=<db> unless its line has
// a db tag of its own, or db is empty.
//
// Lines that cannot be stored are skipped and described in Result.Errors;
// the other lines are all parsed. Parse returns an error, and no Result,
// only when the database name is unusable (ErrBadDatabase) or the body
// breaks a request-wide limit (ErrTooManyPoints, ErrTooManySeries; the
// message names the line and column where it was found).
func (p *Parser) Parse(body []byte, db string, prec Precision, defaultMs int64) (*Result, error) {
	if err := p.start(db, int64(len(body))); err != nil {
		return nil, err
	}
	// A byte-order mark, which some editors put at the start of a file, is
	// not part of the first measurement.
	body = bytes.TrimPrefix(body, utf8BOM)
	lineNo := int32(0)
	for pos := 0; pos < len(body) && p.abort == nil; {
		lineNo++
		var line []byte
		if nl := bytes.IndexByte(body[pos:], '\n'); nl >= 0 {
			line = body[pos : pos+nl]
			pos += nl + 1
		} else {
			line = body[pos:]
			pos = len(body)
		}
		p.line(line, lineNo, prec, defaultMs)
	}
	return p.finish()
}

// readChunkBytes is what ParseReader reads at a time, and the size its
// buffer starts at.
const readChunkBytes = 64 << 10

// ParseReader is Parse reading the body from r as it parses: it holds one
// buffer of at most Options.MaxLineBytes plus a line break, whatever the
// length of the body or of its lines, rather than the whole body. An
// error reading r is returned wrapped, with no Result.
func (p *Parser) ParseReader(r io.Reader, db string, prec Precision, defaultMs int64) (*Result, error) {
	if err := p.start(db, 0); err != nil {
		return nil, err
	}
	if err := p.stream(r, prec, defaultMs); err != nil {
		p.end(false)
		return nil, fmt.Errorf("read body: %w", err)
	}
	return p.finish()
}

// start validates the call's arguments and begins it.
func (p *Parser) start(db string, size int64) error {
	if why := validDatabase(db, p.opts.Limits.MaxValueBytes); why != "" {
		return fmt.Errorf("%w: database %.64q %s", ErrBadDatabase, db, why)
	}
	if size >= math.MaxInt32 {
		return fmt.Errorf("%w: a body of %d bytes is more than one call can take", ErrTooManyPoints, size)
	}
	p.begin(db)
	return nil
}

// finish ends the call: the Result, or the request-wide error.
func (p *Parser) finish() (*Result, error) {
	if err := p.abort; err != nil {
		p.end(false)
		return nil, err
	}
	p.end(true)
	return &p.res, nil
}

// stream feeds the lines read from r to p.line. Its buffer grows (by
// doubling from readChunkBytes) only while one line does not fit, up to
// MaxLineBytes plus CR LF; the rest of a longer line is read and dropped.
func (p *Parser) stream(r io.Reader, prec Precision, defaultMs int64) error {
	limit := p.opts.MaxLineBytes + 2 // the line, a CR and its LF
	if cap(p.rbuf) < min(readChunkBytes, limit) {
		p.rbuf = make([]byte, min(readChunkBytes, limit))
	}
	buf := p.rbuf[:cap(p.rbuf)]
	defer func() { p.rbuf = buf }()
	var (
		head, tail int   // unparsed bytes are buf[head:tail]
		lineNo     int32 // lines begun
		bomChecked bool
		eof        bool
		// A line longer than limit is being dropped: its length so far,
		// its last byte, and whether it is a comment.
		dropping bool
		dropped  int64
		lastByte byte
		comment  bool
	)
	// Line numbers are int32 (in Result, per point): a body of more lines
	// fails the call.
	nextLine := func() bool {
		if lineNo == math.MaxInt32 {
			p.lineNo = lineNo
			p.abortf(1, ErrTooManyPoints, "the body has more than %d lines, more than one call can take", lineNo)
			return false
		}
		lineNo++
		return true
	}
	for {
		if !bomChecked && (tail >= len(utf8BOM) || eof) {
			bomChecked = true
			if bytes.HasPrefix(buf[:tail], utf8BOM) {
				head = len(utf8BOM)
			}
		}
		for bomChecked && p.abort == nil {
			nl := bytes.IndexByte(buf[head:tail], '\n')
			if nl < 0 {
				break
			}
			if dropping {
				if nl > 0 {
					lastByte = buf[head+nl-1]
				}
				p.dropped(lineNo, dropped+int64(nl), lastByte, comment)
				dropping = false
			} else {
				if !nextLine() {
					return nil
				}
				p.line(buf[head:head+nl], lineNo, prec, defaultMs)
			}
			head += nl + 1
		}
		if p.abort != nil {
			return nil
		}
		if eof {
			switch {
			case dropping:
				if tail > head {
					lastByte = buf[tail-1]
				}
				p.dropped(lineNo, dropped+int64(tail-head), lastByte, comment)
			case tail > head && nextLine():
				p.line(buf[head:tail], lineNo, prec, defaultMs)
			}
			return nil
		}
		switch {
		case dropping:
			if tail > head {
				dropped += int64(tail - head)
				lastByte = buf[tail-1]
			}
			head, tail = 0, 0
		case tail-head >= limit:
			// Too long whatever its end holds: drop it.
			if !nextLine() {
				return nil
			}
			dropping, dropped, lastByte = true, int64(tail-head), buf[tail-1]
			comment = isComment(buf[head:tail])
			head, tail = 0, 0
		case head > 0:
			tail = copy(buf, buf[head:tail])
			head = 0
		}
		if tail == len(buf) {
			// One line fills the buffer and is not over the limit yet.
			grown := make([]byte, min(2*len(buf), limit))
			copy(grown, buf[:tail])
			buf = grown
		}
		n, err := r.Read(buf[tail:])
		tail += n
		switch {
		case err == io.EOF:
			eof = true
		case err != nil:
			return err
		}
	}
}

// isComment reports whether the first non-blank byte of b is '#'.
func isComment(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return c == '#'
		}
	}
	return false
}

// line parses one line as it came (no LF; a CR before the LF is dropped
// here).
func (p *Parser) line(line []byte, lineNo int32, prec Precision, defaultMs int64) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > p.opts.MaxLineBytes {
		p.tooLong(lineNo, int64(len(line)), isComment(line))
		return
	}
	base := 0
	for base < len(line) && (line[base] == ' ' || line[base] == '\t') {
		base++
	}
	line = line[base:]
	if len(line) == 0 || line[0] == '#' {
		return
	}
	p.res.Lines++
	p.lineNo = lineNo
	p.parseLine(line, base, lineNo, prec, defaultMs)
}

// dropped ends a line that ParseReader dropped for its length: n bytes
// before its LF, the last of them last.
func (p *Parser) dropped(lineNo int32, n int64, last byte, comment bool) {
	if last == '\r' {
		n--
	}
	p.tooLong(lineNo, n, comment)
}

// tooLong refuses a line of n bytes over MaxLineBytes, unless it is a
// comment.
func (p *Parser) tooLong(lineNo int32, n int64, comment bool) {
	if comment {
		return
	}
	p.res.Lines++
	p.le = lineErr{}
	p.fail(p.opts.MaxLineBytes+1, func() string {
		return fmt.Sprintf("the line is %d bytes, the limit is %d bytes (max-line-bytes); it was not parsed", n, p.opts.MaxLineBytes)
	})
	p.reject(lineNo, 1)
}

// abortf fails the call: a request-wide limit is broken at column col of
// the current line.
func (p *Parser) abortf(col int, err error, format string, args ...any) {
	if p.abort == nil {
		p.abort = fmt.Errorf("line %d, column %d: %w: %s", p.lineNo, col, err, fmt.Sprintf(format, args...))
	}
}

// Release lets go of buffers sized for large bodies; call it before
// keeping a Parser idle. The last Result must not be used after it.
func (p *Parser) Release() {
	if cap(p.tsBuf) > p.opts.RetainPoints {
		p.tsBuf, p.vsBuf, p.lineBuf = nil, nil, nil
	}
	if cap(p.res.offs) > p.opts.RetainPoints {
		p.res.offs = nil
	}
	if cap(p.res.Batches) > p.opts.RetainPoints {
		p.res.Batches = nil
	}
}

func (p *Parser) begin(db string) {
	p.gen++
	p.db = db
	p.keys = p.dbs[db]
	if p.keys == nil {
		p.keys = map[string]*keyEntry{}
		p.dbs[db] = p.keys
		p.cacheBytes += int64(dbOverhead + len(db))
	}
	p.prev = nil
	p.keysUsed = 0
	p.abort = nil
	p.pts.truncate(0)
	p.refs = p.refs[:0]
	p.res.Batches = p.res.Batches[:0]
	p.res.Errors = p.res.Errors[:0]
	p.res.Lines, p.res.RejectedLines = 0, 0
	p.res.Points, p.res.RejectedPoints = 0, 0
	p.res.SkippedStringFields, p.res.SkippedStringLines = 0, 0
	p.res.offs = p.res.offs[:0]
	p.res.lines = nil
}

// end groups the pending points into one batch per series (when ok), and
// trims what must not be kept.
func (p *Parser) end(ok bool) {
	if ok {
		p.group()
	}
	clear(p.refs)
	p.refs = p.refs[:0]
	p.pts.release(p.opts.RetainPoints)
	if p.cacheBytes > p.opts.MaxCacheBytes {
		// Batches keep their label slices; only the lookup structures go.
		p.resetCache()
	}
	p.prev = nil
}

// group lays the pending points out series by series: one pass counts
// the points of each batch, a second copies them to their place, so the
// whole body costs three allocations at most (none once the buffers have
// grown).
func (p *Parser) group() {
	n := p.pts.len()
	nb := len(p.refs)
	p.counts = grow(p.counts, nb)
	counts := p.counts[:nb]
	clear(counts)
	for _, blk := range p.pts.blocks {
		for i := range blk {
			counts[blk[i].batch]++
		}
	}
	p.tsBuf = grow(p.tsBuf, n)
	p.vsBuf = grow(p.vsBuf, n)
	p.lineBuf = grow(p.lineBuf, n)
	ts, vs, ls := p.tsBuf[:n], p.vsBuf[:n], p.lineBuf[:n]
	off := int32(0)
	for b := 0; b < nb; b++ {
		c := counts[b]
		if c == 0 {
			continue // every line that used it was refused
		}
		p.res.Batches = append(p.res.Batches, model.Batch{
			Labels: p.refs[b].lset,
			Ts:     ts[off : off+c : off+c],
			Vs:     vs[off : off+c : off+c],
		})
		p.res.offs = append(p.res.offs, off)
		counts[b] = off // from here on: the next free slot of batch b
		off += c
	}
	for _, blk := range p.pts.blocks {
		for i := range blk {
			pt := &blk[i]
			o := counts[pt.batch]
			counts[pt.batch] = o + 1
			ts[o], vs[o], ls[o] = pt.ts, pt.v, pt.line
		}
	}
	p.res.lines = ls
	p.res.Points = n
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// fail records the first problem of the current line. msg is called only
// while Result.Errors has room for the message: a body of many bad lines
// costs no formatting, and no allocation, past the first MaxErrors.
func (p *Parser) fail(col int, msg func() string) {
	if p.le.set {
		return
	}
	p.le.set = true
	p.le.col = col
	if len(p.res.Errors) < p.opts.MaxErrors {
		p.le.msg = msg()
	}
}

// parseLine parses one line (no line break, no leading blanks; base is
// the number of blanks cut from its start, for columns).
func (p *Parser) parseLine(line []byte, base int, lineNo int32, prec Precision, defaultMs int64) {
	p.le = lineErr{}
	mark := p.pts.len()
	col := func(i int) int { return base + i + 1 }

	keyEnd := keyEnd(line)
	if keyEnd < 0 {
		p.fail(col(len(line)), func() string {
			return "no field set: the measurement and tags must be followed by a space and fields (key=value)"
		})
		p.reject(lineNo, 1)
		return
	}
	i := keyEnd + 1
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i == len(line) {
		p.fail(col(i), func() string { return "no field set after the measurement and tags" })
		p.reject(lineNo, 1)
		return
	}
	// Count the fields before anything is built for them.
	if n, over := countFields(line, i, p.opts.MaxFieldsPerLine); n > p.opts.MaxFieldsPerLine {
		p.fail(col(over), func() string {
			return fmt.Sprintf("the line has %d fields; a line holds at most %d fields (max-fields-per-line), so it was not parsed", n, p.opts.MaxFieldsPerLine)
		})
		p.reject(lineNo, n)
		return
	}
	e := p.entry(line[:keyEnd], base)
	if p.abort != nil {
		return
	}

	// Field set: key=value[,key=value]... Problems with a value are noted
	// and the scan goes on (to count the fields); broken syntax stops it.
	// countFields follows the same syntax.
	fields, strings := 0, 0
	for {
		ks := i
		i = fieldKeyEnd(line, i)
		fields++
		if i == len(line) || line[i] != '=' {
			p.fail(col(ks), func() string { return fmt.Sprintf("field %s has no value (missing '=')", quote(line[ks:i])) })
			break
		}
		if i == ks {
			p.fail(col(ks), func() string { return "empty field key" })
			break
		}
		key := line[ks:i]
		i++
		vs := i
		if i < len(line) && line[i] == '"' {
			i = stringValueEnd(line, i)
			if i > len(line) {
				p.fail(col(vs), func() string { return fmt.Sprintf("the string value of field %s has no closing quote", quote(key)) })
				break
			}
			if p.opts.RefuseStringFields {
				p.fail(col(vs), func() string {
					return fmt.Sprintf("field %s has a string value; string fields are refused (--influx-refuse-string-fields), so the line is refused", quote(key))
				})
			}
			strings++
			if i < len(line) && line[i] != ',' && line[i] != ' ' && line[i] != '\t' {
				p.fail(col(i), func() string {
					return fmt.Sprintf("unexpected %s after the string value of field %s", quote(line[i:i+1]), quote(key))
				})
				break
			}
		} else {
			i = valueEnd(line, i)
			v, reason := parseValue(line[vs:i])
			switch {
			case reason != "":
				p.fail(col(vs), func() string { return fmt.Sprintf("value %s of field %s %s", quote(line[vs:i]), quote(key), reason) })
			case e != nil && !p.le.set:
				if max := p.opts.MaxPoints; max > 0 && p.pts.len() >= max {
					p.abortf(col(ks), ErrTooManyPoints, "the body holds more than %d points, the limit per request", max)
					return
				}
				ref := p.fieldRef(e, key, fields-1, base+ks+1)
				if p.abort != nil {
					return
				}
				if ref != nil {
					b, ok := p.batchOf(ref, base+ks+1)
					if !ok {
						return
					}
					p.pts.push(pending{v: v, batch: b, line: lineNo})
				}
			}
		}
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		break
	}
	if !p.le.set {
		p.parseTimestamp(line, i, base, mark, prec, defaultMs)
	}
	if p.le.set {
		p.pts.truncate(mark)
		p.reject(lineNo, fields)
	} else if strings > 0 {
		p.res.SkippedStringFields += strings
		p.res.SkippedStringLines++
	}
}

// fieldKeyEnd returns the end of the field key starting at line[i]: the
// index of its first unescaped '=', ',' or space, or len(line).
func fieldKeyEnd(line []byte, i int) int {
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ',' || c == ' ' {
			return i
		}
		i++
	}
	return len(line)
}

// stringValueEnd returns the index after the closing quote of the string
// value whose opening quote is line[i], or len(line)+1 when it has none.
func stringValueEnd(line []byte, i int) int {
	i++
	for i < len(line) && line[i] != '"' {
		if line[i] == '\\' {
			i++
		}
		i++
	}
	if i >= len(line) {
		return len(line) + 1
	}
	return i + 1
}

// valueEnd returns the end of the unquoted value starting at line[i].
func valueEnd(line []byte, i int) int {
	for i < len(line) {
		if c := line[i]; c == ',' || c == ' ' || c == '\t' {
			return i
		}
		i++
	}
	return i
}

// countFields counts the fields of the field set starting at line[i] as
// parseLine counts them (up to a syntax error that stops parseLine), and
// returns the index of field limit+1, if there is one. It allocates
// nothing.
func countFields(line []byte, i, limit int) (n, over int) {
	for {
		ks := i
		i = fieldKeyEnd(line, i)
		n++
		if n == limit+1 {
			over = ks
		}
		if i == len(line) || line[i] != '=' || i == ks {
			return n, over
		}
		i++
		if i < len(line) && line[i] == '"' {
			i = stringValueEnd(line, i)
			if i > len(line) || (i < len(line) && line[i] != ',' && line[i] != ' ' && line[i] != '\t') {
				return n, over
			}
		} else {
			i = valueEnd(line, i)
		}
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		return n, over
	}
}

// parseTimestamp reads the optional timestamp from line[i:] and gives it
// to the points of the line (from mark on).
func (p *Parser) parseTimestamp(line []byte, i, base, mark int, prec Precision, defaultMs int64) {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	ts := defaultMs
	if i < len(line) {
		s := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		tok := line[s:i]
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i < len(line) {
			p.fail(base+i+1, func() string { return fmt.Sprintf("unexpected %s after the timestamp", quote(line[i:])) })
			return
		}
		v, st := parseInt(tok)
		switch st {
		case numSyntax:
			p.fail(base+s+1, func() string {
				return fmt.Sprintf("invalid timestamp %s: want an integer number of %s since the epoch", quote(tok), prec)
			})
			return
		case numRange:
			p.fail(base+s+1, func() string { return fmt.Sprintf("timestamp %s is out of the int64 range", quote(tok)) })
			return
		}
		ms, ok := prec.ToMillis(v)
		if !ok {
			p.fail(base+s+1, func() string {
				return fmt.Sprintf("timestamp %s in %s is out of range once converted to milliseconds", quote(tok), prec)
			})
			return
		}
		ts = ms
	}
	p.pts.setTimestamps(mark, ts)
}

func (p *Parser) reject(lineNo int32, fields int) {
	p.res.RejectedLines++
	p.res.RejectedPoints += max(fields, 1)
	if len(p.res.Errors) < p.opts.MaxErrors {
		p.res.Errors = append(p.res.Errors, LineError{Line: int(lineNo), Column: p.le.col, Msg: p.le.msg})
	}
}

// keyEnd returns the index of the first unescaped space of line, or -1.
// A backslash escapes the byte after it, so a space is escaped when an odd
// number of backslashes precedes it.
func keyEnd(line []byte) int {
	from := 0
	for {
		j := bytes.IndexByte(line[from:], ' ')
		if j < 0 {
			return -1
		}
		j += from
		k := j
		for k > 0 && line[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		from = j + 1
	}
}

// quote renders b for an error message, cut to 64 bytes.
func quote(b []byte) string {
	const maxQuote = 64
	if len(b) > maxQuote {
		return strconv.Quote(string(b[:maxQuote])) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}

// batchOf returns the batch index of ref in this call, opening a batch
// when ref has none yet. It returns false, failing the call, when that
// batch would be one more than MaxSeries.
func (p *Parser) batchOf(ref *seriesRef, col int) (int32, bool) {
	if ref.gen != p.gen {
		if max := p.opts.MaxSeries; max > 0 && len(p.refs) >= max {
			p.abortf(col, ErrTooManySeries, "the request holds more than %d series, the limit per request", max)
			return 0, false
		}
		ref.gen = p.gen
		ref.batch = int32(len(p.refs))
		p.refs = append(p.refs, ref)
	}
	return ref.batch, true
}
