package dashboard

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
)

// maxMarkdown bounds the text rendered as Markdown; a longer result is
// shown preformatted, as it is.
const maxMarkdown = 1 << 20

// markdown renders CommonMark with GitHub's tables, strikethrough and task
// lists, a line break where the text breaks a line (as chat windows show
// an agent's text). Its renderer is goldmark's safe default: raw HTML in
// the text is left out (an HTML comment says so) and links or images to
// javascript:, vbscript:, file: or data: URLs lose their target. Table
// alignment is dropped rather than written as a style attribute, which
// the page's Content-Security-Policy would refuse.
var markdown = goldmark.New(
	goldmark.WithExtensions(
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignNone)),
		extension.Strikethrough,
		extension.TaskList,
	),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// markdownHTML renders s as HTML when it is Markdown, and returns "" when
// it is not, so it is shown as preformatted text. Text is Markdown when it
// has Markdown's structure: a heading, a list, a fenced code block, a
// block quote, a table, a link or image, emphasis, strikethrough or inline
// code. Anything else (a line of prose, a log, indented text, a thematic
// break alone, HTML alone) keeps its layout as plain text. The result is
// safe to put in a page as it is: it holds no HTML from s.
func markdownHTML(s string) template.HTML {
	if len(s) > maxMarkdown {
		return ""
	}
	src := []byte(s)
	doc := markdown.Parser().Parse(text.NewReader(src))
	if !hasMarkdown(doc) {
		return ""
	}
	var b bytes.Buffer
	if err := markdown.Renderer().Render(&b, src, doc); err != nil {
		return ""
	}
	return template.HTML(b.String()) // rendered without raw HTML: see markdown
}

// hasMarkdown reports whether doc holds a node that plain text would not
// make.
func hasMarkdown(doc ast.Node) bool {
	found := false
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.Kind() {
		case ast.KindHeading, ast.KindList, ast.KindFencedCodeBlock, ast.KindBlockquote,
			ast.KindLink, ast.KindImage, ast.KindEmphasis, ast.KindCodeSpan,
			east.KindTable, east.KindStrikethrough:
			found = true
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return found
}
