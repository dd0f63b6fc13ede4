package schema

import (
	"fmt"

	"flowzero/internal/config"
)

// Configuration switches columns on and off on top of their defaults (Column.Default):
//
//	schema:
//	  enabled: [SrcMAC, DstMAC, SrcVlan, DstVlan]
//	  disabled: [SrcGeoCity, DstGeoCity]
//
// Naming an unknown column, a column in both lists, or disabling a column that cannot be
// disabled (TimeReceived, SamplingRate, Bytes, Packets) is an error, as is leaving a column
// enabled while a column it depends on is disabled (Dst1stAS needs DstASPath).
type Configuration struct {
	// Enabled lists columns to enable in addition to the default ones.
	Enabled []string `yaml:"enabled"`
	// Disabled lists default columns to disable.
	Disabled []string `yaml:"disabled"`
}

// DefaultConfiguration returns the default configuration: every column at its default.
func DefaultConfiguration() Configuration {
	return Configuration{}
}

// Validate checks the configuration; errors name the bad key and the column.
func (c Configuration) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve computes the set of enabled columns.
func (c Configuration) resolve() (columnBitset, error) {
	var enabled columnBitset
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if columns[k].Default {
			enabled.set(k)
		}
	}
	// where remembers which list entry switched a column, to name it in dependency errors.
	where := map[ColumnKey]string{}
	for i, name := range c.Enabled {
		key := fmt.Sprintf("enabled[%d]", i)
		k, ok := ColumnByName(name)
		if !ok {
			return enabled, config.Errorf(key, "unknown column %q", name)
		}
		enabled.set(k)
		where[k] = key
	}
	for i, name := range c.Disabled {
		key := fmt.Sprintf("disabled[%d]", i)
		k, ok := ColumnByName(name)
		if !ok {
			return enabled, config.Errorf(key, "unknown column %q", name)
		}
		if prev, dup := where[k]; dup {
			return enabled, config.Errorf(key, "column %q is also in %s", name, prev)
		}
		if columns[k].NoDisable {
			return enabled, config.Errorf(key, "column %q cannot be disabled", name)
		}
		enabled.clear(k)
		where[k] = key
	}
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if !enabled.has(k) {
			continue
		}
		for _, d := range columns[k].Depends {
			if enabled.has(d) {
				continue
			}
			if key, ok := where[d]; ok {
				return enabled, config.Errorf(key, "column %q is needed by enabled column %q (disable %s too)",
					columns[d].Name, columns[k].Name, columns[k].Name)
			}
			key := "enabled"
			if w, ok := where[k]; ok {
				key = w
			}
			return enabled, config.Errorf(key, "column %q needs column %q (enable it too)",
				columns[k].Name, columns[d].Name)
		}
	}
	return enabled, nil
}
