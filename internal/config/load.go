package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse decodes errand.yaml strictly, fills the defaults and validates the
// result. Empty data is the default configuration. It does not read the
// environment: see ApplyEnv and Load. The error lists every problem, each
// a *FieldError, except a YAML syntax error, which stops decoding and is a
// *SyntaxError giving the line and column and quoting the line.
func Parse(data []byte) (*Config, error) {
	c, probs, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := validate(c, probs); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads and parses the file at path. A missing file is an error if
// mustExist is set (a path the user named), else the defaults (the default
// path). It does not read the environment.
func LoadFile(path string, mustExist bool) (*Config, error) {
	c, probs, err := loadFile(path, mustExist)
	if err != nil {
		return nil, err
	}
	if err := validate(c, probs); err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Load is LoadEnv with the process environment.
func Load(path string) (*Config, error) {
	return LoadEnv(path, os.LookupEnv)
}

// LoadEnv loads the daemon's configuration: the file at path, or when path
// is empty $ERRAND_HOME/errand.yaml, where a missing file means the
// defaults; then the ERRAND_* overrides read through lookup (see
// ApplyEnv); then Validate. A caller that applies flags on top should
// call Validate again.
func LoadEnv(path string, lookup func(string) (string, bool)) (*Config, error) {
	mustExist := path != ""
	if path == "" {
		home, err := Home(lookup)
		if err != nil {
			return nil, err
		}
		path = filepath.Join(home, FileName)
	}
	c, probs, err := loadFile(path, mustExist)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyEnv(lookup); err != nil {
		return nil, err
	}
	if err := validate(c, probs); err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// loadFile is LoadFile without Validate.
func loadFile(path string, mustExist bool) (*Config, []error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if !mustExist && errors.Is(err, fs.ErrNotExist) {
			return Default(), nil, nil
		}
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	c, probs, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, probs, nil
}

// decode decodes data strictly over the defaults. Problems with keys and
// values come back as FieldErrors in probs, with c holding everything else
// (a bad key keeps its default) so that validation can still report the
// rest; err is a problem that stops decoding, such as a syntax error.
func decode(data []byte) (c *Config, probs []error, err error) {
	c = Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil, nil
		}
		return nil, nil, syntaxError(data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, nil, &FieldError{Line: next.Line, Message: "the file holds more than one YAML document"}
	case !errors.Is(err, io.EOF):
		return nil, nil, syntaxError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return c, nil, nil
	}
	root := doc.Content[0]
	if isNull(root) {
		return c, nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, &FieldError{Line: root.Line, Message: "the file must be a mapping of keys to values"}
	}
	ch := &checker{seen: map[seenKey]checkState{}}
	ch.value(root, configType, "")
	if err := root.Decode(c); err != nil {
		return nil, nil, err
	}
	c.normalize()
	return c, ch.errs, nil
}

// validate joins the decoding problems probs with c's validation errors,
// leaving out those about a key already reported: "agents.a.command:
// required" says nothing new after "agents.a.command[1]: must be a string".
func validate(c *Config, probs []error) error {
	verrs := FieldErrors(c.Validate())
	all := probs
	for _, v := range verrs {
		if !slices.ContainsFunc(probs, func(p error) bool {
			return related(p.(*FieldError).Path, v.Path)
		}) {
			all = append(all, v)
		}
	}
	return errors.Join(all...)
}

// related reports whether one key path is, or is inside, the other.
func related(a, b string) bool {
	inside := func(x, y string) bool {
		return x == y || strings.HasPrefix(x, y+".") || strings.HasPrefix(x, y+"[")
	}
	return inside(a, b) || inside(b, a)
}
