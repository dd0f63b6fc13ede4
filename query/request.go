package query

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"flowzero/query/catalog"
	"flowzero/query/filter"
)

// Bounds of requests.
const (
	MinPoints      = 5
	MaxPoints      = 2000
	MaxDimensions  = 10
	MaxFlowsLimit  = 10000
	MaxFlowsOffset = 100000
	// MaxStatementBytes bounds a statement sent to the engine: ClickHouse's default
	// max_query_size (262,144 bytes, the embedded engine's too) less a margin for the
	// comment the store's read-only connections put before it. A longer one does not
	// parse (Code 62); the request is refused naming the field that makes it long.
	MaxStatementBytes = 262144 - 1024
	// DefaultLimit is the number of rows when a request does not say.
	DefaultLimit = 10
)

// Unit is what a series counts.
type Unit string

// The units.
const (
	UnitL3bps   Unit = "l3bps"  // IP bits per second: Bytes × SamplingRate × 8
	UnitL2bps   Unit = "l2bps"  // Ethernet bits per second: 38 bytes more per packet
	UnitPps     Unit = "pps"    // packets per second: Packets × SamplingRate
	UnitFps     Unit = "fps"    // flow records per second
	UnitInL2Pct Unit = "inl2%"  // L2 bits per second in % of the input interface's speed
	UnitOutL2Pc Unit = "outl2%" // the same for the output interface
)

// Units lists the units.
var Units = []Unit{UnitL3bps, UnitL2bps, UnitPps, UnitFps, UnitInL2Pct, UnitOutL2Pc}

// TopBy is what ranks the rows of a query.
type TopBy string

// The rankings.
const (
	TopByAvg  TopBy = "avg"
	TopByMax  TopBy = "max"
	TopByLast TopBy = "last"
	TopByP95  TopBy = "p95"
)

// RequestError is a request the service refuses: which field, and why.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Message }

func fieldError(field, format string, args ...any) error {
	return &RequestError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Common are the fields of the line, sankey and table queries.
type Common struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Dimensions are column names (any case); none gives the total.
	Dimensions []string `json:"dimensions"`
	// Limit is the number of rows (0: DefaultLimit); the others fold into Other.
	Limit int `json:"limit"`
	// TopBy ranks the rows: avg (default), max, last or p95.
	TopBy TopBy `json:"topBy"`
	// Units: l3bps (default), l2bps, pps, fps, inl2%, outl2%.
	Units Unit `json:"units"`
	// Filter in the filter language; "" for none.
	Filter string `json:"filter"`
	// Truncate4 and Truncate6 cut address dimensions to a prefix (0: not cut, as 32 and 128).
	Truncate4 int `json:"truncate4"`
	Truncate6 int `json:"truncate6"`
	// Table is auto (default) or flows, to read the flows table whatever the range.
	Table string `json:"table"`
}

// common is a validated Common.
type common struct {
	start, end time.Time
	dims       []*catalog.Column
	limit      int
	topBy      TopBy
	units      Unit
	filter     *filter.Filter
	t4, t6     int
	forceFlows bool
}

// validTime checks a time of a request.
func validTime(field string, t time.Time) error {
	if t.IsZero() {
		return fieldError(field, "missing (an RFC 3339 time)")
	}
	if t.Unix() < 0 || t.Year() > 2105 {
		return fieldError(field, "%s is out of the range of stored times (1970 to 2105)", t.Format(time.RFC3339))
	}
	return nil
}

func (r *Common) validate(cat *catalog.Catalog, cfg Configuration, minDims, maxDims int) (common, error) {
	var c common
	if err := validTime("start", r.Start); err != nil {
		return c, err
	}
	if err := validTime("end", r.End); err != nil {
		return c, err
	}
	if !r.Start.Before(r.End) {
		return c, fieldError("end", "must be after start")
	}
	c.start, c.end = r.Start.UTC(), r.End.UTC()
	if len(r.Dimensions) < minDims || len(r.Dimensions) > maxDims {
		if minDims == maxDims {
			return c, fieldError("dimensions", "takes %d columns, not %d", minDims, len(r.Dimensions))
		}
		return c, fieldError("dimensions", "takes %d to %d columns, not %d", minDims, maxDims, len(r.Dimensions))
	}
	for i, name := range r.Dimensions {
		col := cat.Column(name)
		if col == nil {
			return c, fieldError(fmt.Sprintf("dimensions[%d]", i), "unknown column %q", name)
		}
		if !col.Dimension {
			return c, fieldError(fmt.Sprintf("dimensions[%d]", i), "%s cannot be a dimension", col.Name)
		}
		if slices.Contains(c.dims, col) {
			return c, fieldError(fmt.Sprintf("dimensions[%d]", i), "%s is given twice", col.Name)
		}
		c.dims = append(c.dims, col)
	}
	c.limit = r.Limit
	if c.limit == 0 {
		c.limit = min(DefaultLimit, cfg.DimensionsLimit)
	}
	if c.limit < 1 || c.limit > cfg.DimensionsLimit {
		return c, fieldError("limit", "must be in 1..%d, not %d", cfg.DimensionsLimit, r.Limit)
	}
	switch c.topBy = r.TopBy; c.topBy {
	case "":
		c.topBy = TopByAvg
	case TopByAvg, TopByMax, TopByLast, TopByP95:
	default:
		return c, fieldError("topBy", "must be avg, max, last or p95, not %q", r.TopBy)
	}
	switch c.units = r.Units; {
	case c.units == "":
		c.units = UnitL3bps
	case !slices.Contains(Units, c.units):
		return c, fieldError("units", "must be one of %s, not %q", unitList(), r.Units)
	}
	if c.units == UnitInL2Pct || c.units == UnitOutL2Pc {
		speed, iface := "InIfSpeed", "InIf"
		if c.units == UnitOutL2Pc {
			speed, iface = "OutIfSpeed", "OutIf"
		}
		if cat.Column(speed) == nil || cat.Column(iface) == nil || cat.Column("ExporterAddress") == nil {
			return c, fieldError("units", "%s needs the columns %s, %s and ExporterAddress", c.units, speed, iface)
		}
	}
	c.t4, c.t6 = r.Truncate4, r.Truncate6
	if c.t4 == 0 {
		c.t4 = 32
	}
	if c.t6 == 0 {
		c.t6 = 128
	}
	if c.t4 < 1 || c.t4 > 32 {
		return c, fieldError("truncate4", "must be in 1..32 (0 for no truncation), not %d", r.Truncate4)
	}
	if c.t6 < 1 || c.t6 > 128 {
		return c, fieldError("truncate6", "must be in 1..128 (0 for no truncation), not %d", r.Truncate6)
	}
	switch r.Table {
	case "", "auto":
	case "flows":
		c.forceFlows = true
	default:
		return c, fieldError("table", "must be auto or flows, not %q", r.Table)
	}
	f, err := filter.Parse(cat, r.Filter)
	if err != nil {
		return c, err
	}
	c.filter = f
	return c, nil
}

func unitList() string {
	var s []string
	for _, u := range Units {
		s = append(s, string(u))
	}
	return strings.Join(s, ", ")
}

// needsFlowsTable tells whether a query on these columns (and the filter, in either
// direction) must read the flows table: the aggregated tables lack one of them.
func (c *common) needsFlowsTable(cat *catalog.Catalog, reverse bool) bool {
	if c.forceFlows {
		return true
	}
	for _, col := range c.dims {
		if !col.Aggregated || (reverse && !cat.ReverseOf(col).Aggregated) {
			return true
		}
	}
	for _, r := range []bool{false, reverse} {
		for _, col := range c.filter.Columns(r) {
			if !col.Aggregated {
				return true
			}
		}
	}
	return false
}
