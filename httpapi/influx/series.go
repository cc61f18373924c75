package influx

// DatabaseLabel is the label that holds a point's database (the v1 db
// parameter, the v2 bucket) unless a tag of the line becomes it.
const DatabaseLabel = "db"

// MetricName returns the metric name (__name__) of the series a field of
// a measurement is stored as: the measurement and the field key, each
// made a valid label name, joined by '_' (see the package doc). The
// InfluxQL API (httpapi/influxql) calls it to find the series a query
// names, so reads and writes share one rule.
func MetricName(measurement, field string) string {
	b := appendSanitized(nil, []byte(measurement), true)
	b = append(b, '_')
	return string(appendSanitized(b, []byte(field), false))
}

// MeasurementName returns a measurement as it appears at the start of a
// metric name (MetricName without the field).
func MeasurementName(measurement string) string {
	return string(appendSanitized(nil, []byte(measurement), true))
}

// LabelName returns the label name a tag key becomes.
func LabelName(tagKey string) string {
	return string(appendSanitized(nil, []byte(tagKey), true))
}

// FieldName returns a field key as it appears at the end of a metric
// name (MetricName without the measurement).
func FieldName(field string) string {
	return string(appendSanitized(nil, []byte(field), false))
}
