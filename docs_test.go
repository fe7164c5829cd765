package errand_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// markdownLink is a link or image target: [text](target) or ![alt](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinksResolve checks every relative link of the README and the
// pages under docs/: the file it names exists, and the heading its
// #anchor names is in that file. A page moved or a heading renamed fails
// here, not in a reader's browser.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	pages = append(pages, "README.md")
	require.Greater(t, len(pages), 5)
	anchors := map[string]map[string]bool{}
	headingsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := markdownAnchors(t, path)
		anchors[path] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		body, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range markdownLink.FindAllStringSubmatch(string(body), -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // http:, https:, mailto:
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				_, err := os.Stat(path)
				require.NoError(t, err, "%s links to %s, which does not exist", page, target)
			}
			if anchor != "" {
				require.True(t, headingsOf(path)[anchor], "%s links to %s: %s has no heading #%s", page, target, path, anchor)
			}
			checked++
		}
	}
	require.Greater(t, checked, 20, "the pages link to each other")
}

// markdownAnchors are the GitHub anchors of the headings of a Markdown
// file, leaving out lines in fenced code blocks.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if !strings.HasSuffix(path, ".md") {
		return out
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	notWord := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(notWord.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
		out[slug] = true
	}
	require.NoError(t, sc.Err())
	return out
}
