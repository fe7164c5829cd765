package dashboard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Text with Markdown's structure is rendered; plain text is left to be
// shown preformatted.
func TestMarkdownHTML(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		want       string // "" when the text is not Markdown
	}{
		{"heading, list and code", "# Title\n\n- a\n- b\n\n```sh\nls <x>\n```",
			"<h1>Title</h1>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<pre><code class=\"language-sh\">ls &lt;x&gt;\n</code></pre>\n"},
		{"ordered list", "1. one\n2. two", "<ol>\n<li>one</li>\n<li>two</li>\n</ol>\n"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2)", "<p>see <a href=\"https://example.com/a?b=1&amp;c=2\">the docs</a></p>\n"},
		{"emphasis keeps line breaks", "**Name:** x\n**Age:** y", "<p><strong>Name:</strong> x<br>\n<strong>Age:</strong> y</p>\n"},
		{"inline code", "run `make`", "<p>run <code>make</code></p>\n"},
		{"quote", "> said", "<blockquote>\n<p>said</p>\n</blockquote>\n"},
		{"table without style attributes", "| a | b |\n|:--|--:|\n| 1 | 2 |",
			"<table>\n<thead>\n<tr>\n<th>a</th>\n<th>b</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>1</td>\n<td>2</td>\n</tr>\n</tbody>\n</table>\n"},
		{"strikethrough", "~~old~~ new", "<p><del>old</del> new</p>\n"},
		{"plain", "plain text\nsecond line", ""},
		{"empty", "", ""},
		{"a log", "12:00 started\n12:01 done: 3 files", ""},
		{"indented", "    four spaces in\n    and out", ""},
		{"a rule alone", "---", ""},
		{"a bare URL", "see https://example.com", ""},
		{"HTML alone", "<b>bold</b> <script>alert(1)</script>", ""},
		{"too long", "# " + strings.Repeat("x", maxMarkdown), ""},
	} {
		require.Equal(t, tc.want, string(markdownHTML(tc.text)), tc.name)
	}
}

// HTML inside Markdown never reaches the page as HTML, and links lose
// script targets.
func TestMarkdownLeavesOutHTML(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"# Report\n\n<script>alert(1)</script>",
		"# Report\n\n- <img src=x onerror=alert(1)>",
		"# Report\n\ntext <span onclick=\"alert(1)\">y</span> <SCRIPT SRC=//x></SCRIPT>",
		"# Report\n\n<div>\n<svg onload=alert(1)>\n</div>",
		"# Report\n\n[a](javascript:alert(1)) [b](JaVaScRiPt:alert(1)) [c](<javascript:alert(1)>) ![d](data:text/html,<script>alert(1)</script>)",
		"# Report\n\n[t](http://x \"a\" onmouseover=\"alert(1)\")",
		"# Report\n\n```\n</code></pre><script>alert(1)</script>\n```",
		"# Report {onclick=alert(1)}",
	} {
		out := string(markdownHTML(text))
		require.NotEmpty(t, out, text)
		require.NoError(t, liveHTML(out), "%q gave %q", text, out)
		require.NotContains(t, strings.ToLower(out), "javascript:", text)
	}
}

// Any text renders without a panic to HTML that holds only the elements
// and attributes Markdown makes: never a script, an event handler or a
// javascript: link.
func FuzzMarkdownHTML(f *testing.F) {
	for _, s := range []string{
		"# Title\n\n- a\n- b\n\n```go\nx := 1\n```",
		"| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done",
		"# h\n\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>",
		"*a* [l](javascript:alert(1)) ![i](x \"t\") `c` ~~s~~ > q",
		"[a]: <javascript:x>\n\n[a] <svg/onload=alert(1)> &lt;script&gt;",
		"plain text",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		out := string(markdownHTML(text))
		if out == "" {
			return
		}
		if strings.Contains(strings.ToLower(out), "<script") {
			t.Fatalf("%q rendered a script: %q", text, out)
		}
		if err := liveHTML(out); err != nil {
			t.Fatalf("%q rendered %q: %v", text, out, err)
		}
	})
}

// markdownElements and markdownAttributes are all that rendered Markdown
// may hold.
var (
	markdownElements = map[string]bool{
		"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
		"ul": true, "ol": true, "li": true, "blockquote": true, "pre": true, "code": true,
		"em": true, "strong": true, "del": true, "a": true, "img": true, "hr": true, "br": true,
		"table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true, "input": true,
	}
	markdownAttributes = map[string]bool{
		"href": true, "src": true, "alt": true, "title": true, "class": true, "start": true,
		"checked": true, "disabled": true, "type": true,
	}
)

// liveHTML checks the tags of rendered Markdown: each a known element
// with known attributes, no event handler, no script URL. In rendered
// Markdown every '<' outside a tag is escaped, so each '<' starts a tag or
// a comment.
func liveHTML(out string) error {
	for i := 0; i < len(out); i++ {
		if out[i] != '<' {
			if out[i] == '>' {
				return fmt.Errorf("a stray '>' at %d", i)
			}
			continue
		}
		if strings.HasPrefix(out[i:], "<!--") {
			end := strings.Index(out[i:], "-->")
			if end < 0 {
				return fmt.Errorf("an unclosed comment at %d", i)
			}
			if c := out[i : i+end+3]; c != "<!-- raw HTML omitted -->" {
				return fmt.Errorf("a comment from the text: %q", c)
			}
			i += end + 2
			continue
		}
		j := i + 1
		if j < len(out) && out[j] == '/' {
			j++
		}
		k := j
		for k < len(out) && isTagByte(out[k]) {
			k++
		}
		name := strings.ToLower(out[j:k])
		if !markdownElements[name] {
			return fmt.Errorf("element %q", name)
		}
		// Attributes: name, or name="value" with the value escaped.
		for {
			for k < len(out) && out[k] == ' ' {
				k++
			}
			if k >= len(out) {
				return fmt.Errorf("an unclosed tag %q", name)
			}
			if out[k] == '>' {
				break
			}
			if out[k] == '/' && k+1 < len(out) && out[k+1] == '>' {
				k++
				break
			}
			a := k
			for k < len(out) && isTagByte(out[k]) {
				k++
			}
			attr := strings.ToLower(out[a:k])
			if attr == "" {
				return fmt.Errorf("a byte %q in tag %q", out[k], name)
			}
			if strings.HasPrefix(attr, "on") || !markdownAttributes[attr] {
				return fmt.Errorf("attribute %q on %q", attr, name)
			}
			if k < len(out) && out[k] == '=' {
				if k+1 >= len(out) || out[k+1] != '"' {
					return fmt.Errorf("an unquoted value of %q", attr)
				}
				end := strings.IndexByte(out[k+2:], '"')
				if end < 0 {
					return fmt.Errorf("an unclosed value of %q", attr)
				}
				value := out[k+2 : k+2+end]
				if strings.ContainsAny(value, "<>") {
					return fmt.Errorf("%q holds %q unescaped", attr, value)
				}
				if (attr == "href" || attr == "src") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(value)), "javascript:") {
					return fmt.Errorf("a script URL %q", value)
				}
				k += 2 + end + 1
			}
		}
		i = k
	}
	return nil
}

func isTagByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}
