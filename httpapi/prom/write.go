package prom

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
)

// writeBufs are the two buffers of a remote_write request (compressed and
// decoded body), reused across requests.
type writeBufs struct{ body, decoded []byte }

var writeBufPool = sync.Pool{New: func() any { return new(writeBufs) }}

// maxPooledWriteBuf: larger buffers are not kept for reuse.
const maxPooledWriteBuf = 8 << 20

func (b *writeBufs) release() {
	if cap(b.body) > maxPooledWriteBuf {
		b.body = nil
	}
	if cap(b.decoded) > maxPooledWriteBuf {
		b.decoded = nil
	}
	b.body, b.decoded = b.body[:0], b.decoded[:0]
	writeBufPool.Put(b)
}

// checkWriteHeaders accepts snappy-compressed remote_write 1.0 bodies.
func checkWriteHeaders(r *http.Request) *rwError {
	if enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc != "" && enc != "snappy" {
		return rwErrorf(http.StatusUnsupportedMediaType, "Content-Encoding %q is not supported: remote_write bodies are snappy-compressed", enc)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return rwErrorf(http.StatusUnsupportedMediaType, "Content-Type %q: %v", ct, err)
	}
	if mt != "application/x-protobuf" {
		return rwErrorf(http.StatusUnsupportedMediaType, "Content-Type %q is not supported: remote_write sends application/x-protobuf", ct)
	}
	if p := params["proto"]; p != "" && p != "prometheus.WriteRequest" {
		return rwErrorf(http.StatusUnsupportedMediaType,
			"protobuf message %q is not supported: only remote_write 1.0 (prometheus.WriteRequest); set protobuf_message: prometheus.WriteRequest in the remote_write config", p)
	}
	return nil
}

// readBody reads the body into dst, failing with 413 past maxBytes.
func readBody(r *http.Request, maxBytes int64, dst []byte) ([]byte, *rwError) {
	if r.ContentLength > maxBytes {
		return nil, rwErrorf(http.StatusRequestEntityTooLarge, "request body is %d bytes, limit is %d", r.ContentLength, maxBytes)
	}
	if r.ContentLength > 0 && int64(cap(dst)) < r.ContentLength {
		dst = make([]byte, 0, r.ContentLength)
	}
	src := io.LimitReader(r.Body, maxBytes+1)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := src.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, rwErrorf(http.StatusBadRequest, "reading request body: %v", err)
		}
	}
	if int64(len(dst)) > maxBytes {
		return nil, rwErrorf(http.StatusRequestEntityTooLarge, "request body is larger than the limit of %d bytes", maxBytes)
	}
	return dst, nil
}

func (a *API) serveWrite(w http.ResponseWriter, r *http.Request) {
	a.stats.Inc(StatWriteRequests)
	if e := checkWriteHeaders(r); e != nil {
		a.stats.Inc(e.violation)
		writeText(w, e.status, "", e.msg)
		return
	}
	release, err := acquire(r.Context(), a.writes)
	if err != nil {
		a.stats.Inc(httpapi.ViolationOverloaded)
		writeText(w, http.StatusServiceUnavailable, "1",
			fmt.Sprintf("too many concurrent remote_write requests (limit %d); retry later", a.opts.MaxConcurrentWrites))
		return
	}
	defer release()
	bufs := writeBufPool.Get().(*writeBufs)
	defer bufs.release()
	req, e := a.decodeWrite(r, bufs)
	if e != nil {
		a.stats.Inc(e.violation)
		writeText(w, e.status, "", e.msg)
		return
	}
	if len(req.Metadata) > 0 || req.MetadataDropped > 0 {
		a.stats.Add(StatMetadataReceived, int64(len(req.Metadata)+req.MetadataDropped))
		if dropped := a.meta.add(req.Metadata) + req.MetadataDropped; dropped > 0 {
			a.opts.Logger.Warn("prometheus metadata dropped: the cache is full, or a request carried more entries than the per-request limit",
				"dropped", dropped, "cache_limit", a.opts.MaxMetadata, "request_limit", a.cfg.Limits.MaxSeriesPerRequest)
		}
	}
	var res model.WriteResult
	if len(req.Batches) > 0 {
		res, err = a.b.Write(r.Context(), req.Batches)
		if err != nil {
			httpapi.CountError(a.stats, err)
			status, retry := httpapi.StatusFor(err)
			if backend.Classify(err) == backend.KindOverloaded {
				status = a.opts.WriteOverloadStatus
			}
			writeText(w, status, retry, fmt.Sprintf("nothing of this request was stored: %v", err))
			return
		}
	}
	// Series the decoder refused for their labels count as the node's
	// invalid series would.
	res.Rejected += req.RefusedSamples
	res.RejectedBy[model.RejectInvalidSeries] += req.RefusedSamples
	a.stats.Add(StatSamplesAccepted, res.Accepted)
	a.stats.Add(StatSamplesRejected, res.Rejected)
	a.stats.Add(httpapi.ViolationRejectedPoints, res.Rejected)
	a.stats.Add(StatHistogramsDropped, req.Histograms)
	a.stats.Add(StatExemplarsDropped, req.Exemplars)
	if res.Rejected == 0 && req.Histograms == 0 && req.Exemplars == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeText(w, http.StatusBadRequest, "", writeReport(req, &res))
}

func (a *API) decodeWrite(r *http.Request, bufs *writeBufs) (*writeRequest, *rwError) {
	maxBytes := a.cfg.Limits.MaxBodyBytes
	body, e := readBody(r, maxBytes, bufs.body)
	if e != nil {
		return nil, e
	}
	bufs.body = body
	lim := a.cfg.Limits
	req, decoded, e := decodeBody(body, bufs.decoded, maxBytes,
		rwLimits{maxSamples: int64(lim.MaxPointsPerRequest), maxSeries: lim.MaxSeriesPerRequest, labels: lim.Labels, maxMetadata: lim.MaxSeriesPerRequest})
	bufs.decoded = decoded
	return req, e
}

// decodeBody decodes a snappy-compressed WriteRequest, using dst for the
// decoded bytes when it is large enough (and returning the buffer used).
// maxBytes bounds the decoded size, lim what is built from it.
func decodeBody(body, dst []byte, maxBytes int64, lim rwLimits) (*writeRequest, []byte, *rwError) {
	decoded, e := decodeSnappy(dst, body, maxBytes)
	if e != nil {
		return nil, dst, e
	}
	req, err := decodeWriteRequest(decoded, lim)
	if err != nil {
		var re *rwError
		if errors.As(err, &re) {
			return nil, decoded, re
		}
		return nil, decoded, rwErrorf(http.StatusInternalServerError, "%v", err)
	}
	return req, decoded, nil
}

// maxReportDetails bounds the rejections listed in a 400 answer.
// Prometheus logs the first 1 KiB of the body, so counts come first.
const maxReportDetails = 10

// writeReport says what of a request was not stored, and why.
func writeReport(req *writeRequest, res *model.WriteResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stored %d of %d samples", res.Accepted, req.Samples)
	if res.Rejected > 0 {
		fmt.Fprintf(&b, "; rejected %d (", res.Rejected)
		first := true
		for reason, n := range res.RejectedBy {
			if n == 0 {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			fmt.Fprintf(&b, "%s: %d", model.RejectReason(reason), n)
		}
		b.WriteString(")")
	}
	if req.Histograms > 0 {
		fmt.Fprintf(&b, "; dropped %d native histogram samples in %d series: native histograms are not supported (set send_native_histograms: false)",
			req.Histograms, req.HistogramSeries)
	}
	if req.Exemplars > 0 {
		fmt.Fprintf(&b, "; dropped %d exemplars in %d series: exemplars are not stored (set send_exemplars: false)",
			req.Exemplars, req.ExemplarSeries)
	}
	listed := 0
	for _, why := range req.RefusedWhy {
		b.WriteString("\n")
		b.WriteString(why)
		listed++
	}
	for i, rj := range res.Rejections {
		if listed == maxReportDetails {
			fmt.Fprintf(&b, "\n... and %d more", len(res.Rejections)-i)
			break
		}
		b.WriteString("\n")
		b.WriteString(rejectionText(req, rj))
		listed++
	}
	if more := req.Refused - len(req.RefusedWhy); more > 0 {
		fmt.Fprintf(&b, "\n... and %d more series refused for their labels", more)
	}
	return b.String()
}

// rejectionText names the request's time series instead of the node's
// batch in a rejection message ("batch 3 point 1: ..." becomes
// "timeseries 7 point 1: ...").
func rejectionText(req *writeRequest, rj model.Rejection) string {
	idx := rj.BatchIndex
	if idx >= 0 && idx < len(req.Index) {
		idx = req.Index[idx]
	}
	prefix := "batch " + strconv.Itoa(rj.BatchIndex)
	msg := rj.Message
	if rest, ok := strings.CutPrefix(msg, prefix); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		return "timeseries " + strconv.Itoa(idx) + rest
	}
	return fmt.Sprintf("timeseries %d: %s", idx, msg)
}

// writeText sends a plain-text answer (remote_write clients log it).
func writeText(w http.ResponseWriter, status int, retryAfter, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
