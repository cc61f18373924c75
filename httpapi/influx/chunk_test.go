package influx

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/labels"
)

func TestChunkReader_LineNumbersSpanChunks(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		if i == 20 {
			b.WriteString("c,pad=" + strings.Repeat("x", 100) + " v=1 1\n") // line 21: too long
			continue
		}
		if i == 40 {
			b.WriteString("c v=oops 1\n") // line 41: refused
			continue
		}
		b.WriteString("c v=1 1\n")
	}
	cr, err := NewChunkReader(strings.NewReader(b.String()), ChunkOptions{Precision: Second, DB: "d", MaxLineBytes: 64, ChunkBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	var lines, rejected, points, chunks int
	var tooLong []int
	var errs []string
	for {
		ch, err := cr.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		lines += ch.Lines
		rejected += ch.RejectedLines
		tooLong = append(tooLong, ch.TooLong...)
		for _, e := range ch.Errors {
			errs = append(errs, e.Error())
		}
		for _, b := range ch.Batches {
			points += len(b.Ts)
			if !slices.Contains(b.Labels, labels.Label{Name: "db", Value: "d"}) {
				t.Fatalf("batch %v lacks db=d", b.Labels)
			}
		}
	}
	if chunks < 3 {
		t.Fatalf("%d chunks, want the input split", chunks)
	}
	if lines != 49 || rejected != 1 || points != 48 || len(tooLong) != 1 || tooLong[0] != 21 {
		t.Fatalf("lines %d rejected %d points %d too long %v", lines, rejected, points, tooLong)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "line 41, column") {
		t.Fatalf("errors %q, want one on line 41", errs)
	}
}

func TestChunkReader_StopsWithContextAndRefusesBadDatabase(t *testing.T) {
	if _, err := NewChunkReader(strings.NewReader(""), ChunkOptions{DB: "a\x00b"}); err == nil {
		t.Fatal("a database with a control character accepted")
	}
	cr, err := NewChunkReader(strings.NewReader("m v=1\n"), ChunkOptions{Now: func() time.Time { return time.UnixMilli(7) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cr.Next(ctx); err != context.Canceled {
		t.Fatalf("Next after cancel = %v", err)
	}
	ch, err := cr.Next(context.Background())
	if err != nil || len(ch.Batches) != 1 || ch.Batches[0].Ts[0] != 7 {
		t.Fatalf("chunk %+v, %v: want m at the reader's now", ch, err)
	}
}
