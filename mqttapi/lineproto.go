package mqttapi

import (
	"errors"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// lineDecoder reads InfluxDB line protocol with the parser of the HTTP
// write API (httpapi/influx), under the same limits: a payload is a body
// of /write.
type lineDecoder struct {
	p    *influx.Parser
	db   string
	prec influx.Precision
	own  []labels.Label // scratch
}

func newLineDecoder(o *Options, db string, prec influx.Precision) *lineDecoder {
	return &lineDecoder{
		p: influx.NewParser(influx.Options{
			Limits:             o.Limits,
			MaxPoints:          o.MaxPointsPerMessage,
			MaxSeries:          o.MaxPointsPerMessage,
			MaxLineBytes:       o.MaxLineBytes,
			MaxFieldsPerLine:   o.MaxFieldsPerLine,
			RefuseStringFields: o.RefuseStringFields,
			MaxErrors:          1,
		}),
		db:   db,
		prec: prec,
	}
}

func (d *lineDecoder) decode(in *inbound, r *result) {
	res, err := d.p.Parse(in.payload, d.db, d.prec, in.receivedMs)
	defer d.p.Release()
	switch {
	case errors.Is(err, influx.ErrTooManyPoints):
		r.refuseAll(reasonTooManyPoints, "%v", err)
		return
	case errors.Is(err, influx.ErrTooManySeries):
		r.refuseAll(reasonTooManySeries, "%v", err)
		return
	case err != nil:
		r.refuseAll(reasonSyntax, "%v", err)
		return
	}
	if res.RejectedLines > 0 {
		msg := "line refused"
		if len(res.Errors) > 0 {
			msg = res.Errors[0].Error()
		}
		r.refuseMany(reasonBadLine, res.RejectedLines, res.RejectedPoints, "%s", msg)
	}
	for _, b := range res.Batches {
		name := ""
		d.own = d.own[:0]
		for _, l := range b.Labels {
			if l.Name == labels.MetricName {
				name = l.Value
			} else {
				d.own = append(d.own, l)
			}
		}
		if !r.addAll(name, d.own, b.Ts, b.Vs) {
			return
		}
	}
}
