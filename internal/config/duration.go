package config

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string: "90s", "5m",
// "1h30m", "720h". A number without a unit is refused (is "90" seconds or
// nanoseconds?), except 0; so is a negative duration. It encodes back as a
// string, in YAML, JSON and text.
type Duration time.Duration

// ParseDuration parses a non-negative Go duration string with a unit, or
// "0".
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			return 0, fmt.Errorf("%q has no unit: write a duration like 90s, 5m or 720h", s)
		}
		return 0, fmt.Errorf("%q is not a duration like 90s, 5m or 720h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	return Duration(d), nil
}

// String returns the duration as time.Duration formats it, e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("must be a duration like 90s, 5m or 720h")
	}
	return d.UnmarshalText([]byte(n.Value))
}
