package influx

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// ChunkOptions configure a ChunkReader. The zero value of a field means
// its default.
type ChunkOptions struct {
	// Precision is the unit of the lines' timestamps (the zero value is
	// Nanosecond).
	Precision Precision
	// DB adds the label db=DB to every point without a db tag (as the v1
	// write API's db parameter); empty: none.
	DB string
	// MaxLineBytes bounds one line: a longer one is skipped, never held
	// whole in memory. Default 1 MiB.
	MaxLineBytes int
	// ChunkBytes is how much line protocol is parsed at a time. Default
	// 1 MiB.
	ChunkBytes int
	// Now dates the lines without a timestamp. Default time.Now.
	Now func() time.Time
}

// Validate fills in defaults and rejects impossible values.
func (o *ChunkOptions) Validate() error {
	o.MaxLineBytes = cmp.Or(o.MaxLineBytes, 1<<20)
	o.ChunkBytes = cmp.Or(o.ChunkBytes, 1<<20)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxLineBytes < 16 || o.ChunkBytes < 1 {
		return fmt.Errorf("chunk reader options: MaxLineBytes %d, ChunkBytes %d (want at least 16 and 1)", o.MaxLineBytes, o.ChunkBytes)
	}
	if why := validDatabase(o.DB, labels.DefaultLimits.MaxValueBytes); why != "" {
		return fmt.Errorf("%w: database %.64q %s", ErrBadDatabase, o.DB, why)
	}
	return nil
}

// ChunkReader reads line protocol of any length (a file, standard input)
// a chunk of lines at a time, so that memory stays bounded by the chunk
// and the longest line kept. Not safe for concurrent use.
type ChunkReader struct {
	o     ChunkOptions
	lr    *httpapi.LineReader
	p     *Parser
	chunk []byte
	ch    Chunk
}

// Chunk is what ChunkReader made of one chunk of lines. It and its slices
// are valid until the next call of Next.
type Chunk struct {
	// TooLong lists the numbers of the lines skipped for their length, in
	// input order; they are not counted in Lines or RejectedLines.
	TooLong []int
	// Batches holds the chunk's points, one batch per series (as
	// Result.Batches).
	Batches []model.Batch
	// Errors describes the first refused lines of the chunk, with their
	// line numbers in the whole input.
	Errors []LineError
	// Lines and RejectedLines count the lines of the chunk that hold a
	// point, and those refused (as in Result).
	Lines, RejectedLines int
	// SkippedStringFields counts the string fields not stored (as in
	// Result).
	SkippedStringFields int
}

// NewChunkReader returns a ChunkReader over r.
func NewChunkReader(r io.Reader, o ChunkOptions) (*ChunkReader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &ChunkReader{o: o, lr: httpapi.NewLineReader(r, o.MaxLineBytes),
		p: NewParser(Options{MaxLineBytes: o.MaxLineBytes}), chunk: make([]byte, 0, o.ChunkBytes+4096)}, nil
}

// Next reads and parses the next chunk of lines (about ChunkBytes). It
// returns io.EOF after the last one, ctx's error once ctx ends (the lines
// read since the last chunk are not parsed), and a read error wrapped.
func (c *ChunkReader) Next(ctx context.Context) (*Chunk, error) {
	c.chunk = c.chunk[:0]
	c.ch.TooLong = c.ch.TooLong[:0]
	firstLine := 0 // input line number of the chunk's first line
	for len(c.chunk) < c.o.ChunkBytes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, tooLong, err := c.lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(c.chunk) == 0 {
			firstLine = c.lr.Line()
		}
		if tooLong {
			// An empty line in its place keeps the parser's line numbers
			// right.
			c.ch.TooLong = append(c.ch.TooLong, c.lr.Line())
		} else {
			c.chunk = append(c.chunk, line...)
		}
		c.chunk = append(c.chunk, '\n')
	}
	if len(c.chunk) == 0 {
		return nil, io.EOF
	}
	res, err := c.p.Parse(c.chunk, c.o.DB, c.o.Precision, c.o.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("parse lines %d to %d: %w", firstLine, c.lr.Line(), err)
	}
	for i := range res.Errors {
		res.Errors[i].Line += firstLine - 1
	}
	c.ch.Batches, c.ch.Errors, c.ch.Lines, c.ch.RejectedLines = res.Batches, res.Errors, res.Lines, res.RejectedLines
	c.ch.SkippedStringFields = res.SkippedStringFields
	return &c.ch, nil
}
