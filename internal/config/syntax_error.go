package config

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// SyntaxError is a YAML syntax error in the file: where it is, and the line
// it is on.
type SyntaxError struct {
	// Line is the 1-based line of the problem.
	Line int
	// Column is the 1-based column (in characters) of the problem, or 0
	// when it is not known.
	Column int
	// Text is the line, as it is in the file.
	Text string
	// Message is the parser's description, e.g. "did not find expected key".
	Message string
}

// Error returns "line L, column C: message" and the line quoted below, with
// a caret under the column when it is known.
func (e *SyntaxError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "YAML syntax error at line %d", e.Line)
	if e.Column > 0 {
		fmt.Fprintf(&b, ", column %d", e.Column)
	}
	fmt.Fprintf(&b, ": %s\n", e.Message)
	num := strconv.Itoa(e.Line)
	fmt.Fprintf(&b, "  %s | %s", num, e.Text)
	if e.Column > 0 {
		// The caret's indent copies the line's tabs, so it lines up.
		var pad strings.Builder
		for i, r := range []rune(e.Text) {
			if i >= e.Column-1 {
				break
			}
			if r == '\t' {
				pad.WriteRune('\t')
			} else {
				pad.WriteByte(' ')
			}
		}
		fmt.Fprintf(&b, "\n  %s | %s^", strings.Repeat(" ", len(num)), pad.String())
	}
	return b.String()
}

// maxLocate bounds the files whose syntax errors are located by parsing
// their prefixes, which takes time quadratic in the file's size; a larger
// file's error has the line the parser reports.
const maxLocate = 32 << 10

var yamlErrorRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxError turns a parse error of data into a *SyntaxError, or returns
// err as it is when it is not a syntax error.
//
// The parser's message names the line where the construct holding the
// problem began, not the problem's own (and for some errors that line
// counts from 0): a misindented key on line 4 of a mapping that starts on
// line 2 reads "line 1". The problem's line is found instead as the first
// prefix of the file, from that line on, that fails the same way; its
// column, as the first prefix of that line that does.
func syntaxError(data []byte, err error) error {
	m := yamlErrorRE.FindStringSubmatch(err.Error())
	if m == nil || strings.Contains(m[2], "\n") {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	problem := m[2]
	lines := strings.SplitAfter(string(data), "\n")
	if len(data) > maxLocate {
		if reported < 1 || reported > len(lines) {
			return err
		}
		return &SyntaxError{Line: reported, Text: lineText(lines[reported-1]), Message: problem}
	}
	fails := func(prefix string) bool {
		e := parseAll(prefix)
		if e == nil {
			return false
		}
		pm := yamlErrorRE.FindStringSubmatch(e.Error())
		return pm != nil && pm[2] == problem
	}
	line := 0
	var before strings.Builder // the lines before line
	for k := 1; k <= len(lines); k++ {
		if k >= reported && fails(before.String()+lines[k-1]) {
			line = k
			break
		}
		before.WriteString(lines[k-1])
	}
	if line == 0 {
		if reported < 1 || reported > len(lines) {
			return err
		}
		return &SyntaxError{Line: reported, Text: lineText(lines[reported-1]), Message: problem}
	}
	text := lineText(lines[line-1])
	column := 0
	for i, r := range text {
		end := i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			end = i + 1
		}
		if fails(before.String() + text[:end]) {
			column = utf8.RuneCountInString(text[:end])
			break
		}
	}
	return &SyntaxError{Line: line, Column: column, Text: text, Message: problem}
}

// parseAll parses every document of data, returning the first error.
func parseAll(data string) error {
	dec := yaml.NewDecoder(strings.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lineText is a line without its line break.
func lineText(line string) string {
	return strings.TrimRight(line, "\r\n")
}
