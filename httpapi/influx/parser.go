package influx

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// Options configure a Parser. The zero value of a field means its default.
type Options struct {
	// Limits bound the series the parser builds; a line whose series would
	// break them is refused with a line error. They should equal the
	// node's limits. Default labels.DefaultLimits.
	Limits labels.Limits
	// MaxPoints makes Parse stop with ErrTooManyPoints once a body yields
	// more points than this. 0 means no limit.
	MaxPoints int
	// MaxErrors bounds the line errors Parse describes in Result.Errors;
	// the counts in Result are always complete. Default 100.
	MaxErrors int
	// MaxCacheBytes bounds (approximately) the memory the series cache
	// keeps from one call to the next; past it the cache is emptied.
	// Default 8 MiB.
	MaxCacheBytes int64
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

func (o Options) withDefaults() Options {
	if o.Limits == (labels.Limits{}) {
		o.Limits = labels.DefaultLimits
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = DefaultMaxErrors
	}
	if o.MaxCacheBytes <= 0 {
		o.MaxCacheBytes = DefaultMaxCacheBytes
	}
	if o.RetainPoints <= 0 {
		o.RetainPoints = DefaultRetainPoints
	}
	return o
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// ErrTooManyPoints is returned (wrapped) by Parse when a body holds more
// points than Options.MaxPoints.
var ErrTooManyPoints = errors.New("too many points")

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
	Batches []node.Batch
	// Errors describes the first refused lines, in line order.
	Errors []LineError
	// Lines counts the lines that hold a point (blank lines and comments
	// are not counted); RejectedLines counts those refused.
	Lines, RejectedLines int
	// Points counts the points in Batches; RejectedPoints counts the fields
	// of refused lines (at least one per line, whatever could be read of
	// its field set).
	Points, RejectedPoints int

	offs  []int32 // per batch, where its line numbers start in lines
	lines []int32
}

// Line returns the line number of point i of batch b.
func (r *Result) Line(b, i int) int { return int(r.lines[int(r.offs[b])+i]) }

// Parser turns line protocol into node batches. It keeps a cache from
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
	pts     []pending
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
}

// keyEntry is a cached series key: the sanitized measurement and the
// sorted tags (with the db label), and one fieldEntry per field seen.
type keyEntry struct {
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

// lineErr is the first problem found on the line being parsed.
type lineErr struct {
	set bool
	col int
	msg string
}

// NewParser returns a Parser with opts (zero fields take their defaults).
func NewParser(opts Options) *Parser {
	p := &Parser{opts: opts.withDefaults()}
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
// holds more than Options.MaxPoints points (ErrTooManyPoints).
func (p *Parser) Parse(body []byte, db string, prec Precision, defaultMs int64) (*Result, error) {
	if why := validDatabase(db, p.opts.Limits.MaxValueBytes); why != "" {
		return nil, fmt.Errorf("%w: database %.64q %s", ErrBadDatabase, db, why)
	}
	if len(body) >= math.MaxInt32 {
		return nil, fmt.Errorf("%w: a body of %d bytes is more than one call can take", ErrTooManyPoints, len(body))
	}
	p.begin(db)
	// A byte-order mark, which some editors put at the start of a file, is
	// not part of the first measurement.
	body = bytes.TrimPrefix(body, utf8BOM)
	lineNo := int32(0)
	for pos := 0; pos < len(body); {
		lineNo++
		var line []byte
		if nl := bytes.IndexByte(body[pos:], '\n'); nl >= 0 {
			line = body[pos : pos+nl]
			pos += nl + 1
		} else {
			line = body[pos:]
			pos = len(body)
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		base := 0
		for base < len(line) && (line[base] == ' ' || line[base] == '\t') {
			base++
		}
		line = line[base:]
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		p.res.Lines++
		p.parseLine(line, base, lineNo, prec, defaultMs)
		if p.opts.MaxPoints > 0 && len(p.pts) > p.opts.MaxPoints {
			p.end(false)
			return nil, fmt.Errorf("%w: the body holds more than %d points, the limit", ErrTooManyPoints, p.opts.MaxPoints)
		}
	}
	p.end(true)
	return &p.res, nil
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
	p.pts = p.pts[:0]
	p.refs = p.refs[:0]
	p.res.Batches = p.res.Batches[:0]
	p.res.Errors = p.res.Errors[:0]
	p.res.Lines, p.res.RejectedLines = 0, 0
	p.res.Points, p.res.RejectedPoints = 0, 0
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
	if cap(p.pts) > p.opts.RetainPoints {
		p.pts = nil
	}
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
	n := len(p.pts)
	nb := len(p.refs)
	p.counts = grow(p.counts, nb)
	counts := p.counts[:nb]
	clear(counts)
	for i := range p.pts {
		counts[p.pts[i].batch]++
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
		p.res.Batches = append(p.res.Batches, node.Batch{
			Labels: p.refs[b].lset,
			Ts:     ts[off : off+c : off+c],
			Vs:     vs[off : off+c : off+c],
		})
		p.res.offs = append(p.res.offs, off)
		counts[b] = off // from here on: the next free slot of batch b
		off += c
	}
	for i := range p.pts {
		pt := &p.pts[i]
		o := counts[pt.batch]
		counts[pt.batch] = o + 1
		ts[o], vs[o], ls[o] = pt.ts, pt.v, pt.line
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

// failf records the first problem of the current line. The message is
// formatted only while Result.Errors has room for it.
func (p *Parser) failf(col int, format string, args ...any) {
	if p.le.set {
		return
	}
	p.le.set = true
	p.le.col = col
	if len(p.res.Errors) < p.opts.MaxErrors {
		p.le.msg = fmt.Sprintf(format, args...)
	}
}

// parseLine parses one line (no line break, no leading blanks; base is
// the number of blanks cut from its start, for columns).
func (p *Parser) parseLine(line []byte, base int, lineNo int32, prec Precision, defaultMs int64) {
	p.le = lineErr{}
	mark := len(p.pts)
	col := func(i int) int { return base + i + 1 }

	keyEnd := keyEnd(line)
	if keyEnd < 0 {
		p.failf(col(len(line)), "no field set: the measurement and tags must be followed by a space and fields (key=value)")
		p.reject(lineNo, 1)
		return
	}
	e := p.entry(line[:keyEnd], base)
	i := keyEnd + 1
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i == len(line) {
		p.failf(col(i), "no field set after the measurement and tags")
		p.reject(lineNo, 1)
		return
	}

	// Field set: key=value[,key=value]... Problems with a value are noted
	// and the scan goes on (to count the fields); broken syntax stops it.
	fields := 0
	for {
		ks := i
		for i < len(line) {
			c := line[i]
			if c == '\\' {
				i += 2
				continue
			}
			if c == '=' || c == ',' || c == ' ' {
				break
			}
			i++
		}
		i = min(i, len(line))
		fields++
		if i == len(line) || line[i] != '=' {
			p.failf(col(ks), "field %s has no value (missing '=')", quote(line[ks:i]))
			break
		}
		if i == ks {
			p.failf(col(ks), "empty field key")
			break
		}
		key := line[ks:i]
		i++
		vs := i
		if i < len(line) && line[i] == '"' {
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(line) {
				p.failf(col(vs), "the string value of field %s has no closing quote", quote(key))
				break
			}
			i++
			p.failf(col(vs), "field %s has a string value; string fields are not supported, so the line is refused", quote(key))
			if i < len(line) && line[i] != ',' && line[i] != ' ' && line[i] != '\t' {
				p.failf(col(i), "unexpected %s after the string value of field %s", quote(line[i:i+1]), quote(key))
				break
			}
		} else {
			for i < len(line) {
				c := line[i]
				if c == ',' || c == ' ' || c == '\t' {
					break
				}
				i++
			}
			v, reason := parseValue(line[vs:i])
			switch {
			case reason != "":
				p.failf(col(vs), "value %s of field %s %s", quote(line[vs:i]), quote(key), reason)
			case e != nil && !p.le.set:
				if ref := p.fieldRef(e, key, fields-1, base+ks+1); ref != nil {
					p.pts = append(p.pts, pending{v: v, batch: p.batchOf(ref), line: lineNo})
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
		p.pts = p.pts[:mark]
		p.reject(lineNo, fields)
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
			p.failf(base+i+1, "unexpected %s after the timestamp", quote(line[i:]))
			return
		}
		v, st := parseInt(tok)
		switch st {
		case numSyntax:
			p.failf(base+s+1, "invalid timestamp %s: want an integer number of %s since the epoch", quote(tok), prec)
			return
		case numRange:
			p.failf(base+s+1, "timestamp %s is out of the int64 range", quote(tok))
			return
		}
		ms, ok := prec.ToMillis(v)
		if !ok {
			p.failf(base+s+1, "timestamp %s in %s is out of range once converted to milliseconds", quote(tok), prec)
			return
		}
		ts = ms
	}
	for k := mark; k < len(p.pts); k++ {
		p.pts[k].ts = ts
	}
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
// when ref has none yet.
func (p *Parser) batchOf(ref *seriesRef) int32 {
	if ref.gen != p.gen {
		ref.gen = p.gen
		ref.batch = int32(len(p.refs))
		p.refs = append(p.refs, ref)
	}
	return ref.batch
}
