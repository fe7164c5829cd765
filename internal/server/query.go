package server

import (
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// checkQuery refuses a query string that does not parse as a whole. Go's
// own parser drops the pairs it cannot read (a ";" separator, a bad
// escape) and keeps the rest, so a filter would silently vanish and a list
// answer with everything.
func checkQuery(raw string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil || !utf8.ValidString(name) {
			return malformed("", "the query string does not parse: parameter name %q is not a valid escaped UTF-8 string", rawName)
		}
		if strings.Contains(pair, ";") {
			return malformed(name, "query parameter %s holds a \";\": separate parameters with \"&\", and write a literal \";\" as %%3B", name)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return malformed(name, "query parameter %s does not parse: %v", name, err)
		}
		if !utf8.ValidString(value) {
			return malformed(name, "query parameter %s is not valid UTF-8", name)
		}
	}
	return nil
}

// checkParams refuses a query parameter the route does not read (route is
// its pattern, known its parameters): a misspelt or unsupported filter
// must not pass silently and answer with everything. The query string is
// known to parse (checkQuery).
func checkParams(raw, route string, known []string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		rawName, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return malformed("", "the query string does not parse: parameter name %q is not a valid escaped UTF-8 string", rawName)
		}
		if slices.Contains(known, name) {
			continue
		}
		takes := "no query parameters"
		if len(known) > 0 {
			takes = strings.Join(known, ", ")
		}
		return malformed(name, "unknown query parameter %q: %s takes %s", name, route, takes)
	}
	return nil
}
