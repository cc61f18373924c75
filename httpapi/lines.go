package httpapi

import (
	"bufio"
	"fmt"
	"io"
)

// LineReader splits a stream of text into lines of at most a bounded
// length, so that memory stays bounded whatever the input: a longer line
// is read through and dropped, and reported as too long. It reads point
// files (`tributary write`); a request body is read by its protocol's
// parser. Not safe for concurrent use.
type LineReader struct {
	br   *bufio.Reader
	line int // number of the line last returned, 1-based
}

// NewLineReader returns a LineReader over r that keeps lines shorter than
// maxLineBytes (the line and its LF fit in a buffer of that size).
func NewLineReader(r io.Reader, maxLineBytes int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, maxLineBytes)}
}

// Line is the 1-based number of the line Next returned last.
func (lr *LineReader) Line() int { return lr.line }

// Next returns the next line without its line break (LF or CRLF); the
// slice is valid until the next call. A line longer than the reader's
// buffer is skipped and returned as tooLong. At the end it returns io.EOF;
// an error reading the input is returned wrapped.
func (lr *LineReader) Next() (line []byte, tooLong bool, err error) {
	b, err := lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		for err == bufio.ErrBufferFull {
			_, err = lr.br.ReadSlice('\n')
		}
		lr.line++
		if err != nil && err != io.EOF {
			return nil, false, fmt.Errorf("read input: %w", err)
		}
		return nil, true, nil
	}
	if err != nil && err != io.EOF {
		return nil, false, fmt.Errorf("read input: %w", err)
	}
	if err == io.EOF && len(b) == 0 {
		return nil, false, io.EOF
	}
	lr.line++
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, false, nil
}

// IsDigits reports whether s is one or more ASCII decimal digits: how the
// text inputs (CSV, OpenTSDB, the command line's times) tell an integer
// from the other forms a field may take.
func IsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
