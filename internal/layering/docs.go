package layering

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The rules docs_test.go keeps between the code and its documentation:
//
//   - docs/architecture.md's package map (packageMap) names every package
//     of the module and of bench/, no other, each with exactly the imports
//     the layering table (allowed, in layering_test.go) lets it make;
//   - docs/testing.md's list of fuzz targets (fuzzList) names every Fuzz
//     function of the module under its package, and the Makefile's fuzz
//     target runs each (makeFuzzTargets);
//   - every relative link of a Markdown file (markdownLinks) names a file
//     that exists, and a heading of it when it names one (headingAnchors);
//   - no file of the repository cites an issue number (issueNumber): a
//     comment or a doc says what the code is, and the history of a change
//     is its commit message's.

// backticked returns the spans of s between backticks, in order.
func backticked(s string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(s, "`")
		if !ok {
			return out
		}
		span, after, ok := strings.Cut(rest, "`")
		if !ok {
			return out
		}
		out = append(out, span)
		s = after
	}
}

// tableCells splits a Markdown table row into its cells, trimmed; nil for
// a line that is no row.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}

// section returns the lines of md under the heading "## "+title, up to the
// next heading of that level or above; nil when there is none.
func section(md, title string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == title && strings.HasPrefix(line, "## ")
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return out
}

// packageMap reads the package map of docs/architecture.md: every row of
// the tables under "## Package map" whose header's first cell is
// "package", by the package's path (the first cell's backticked span,
// without a trailing slash), with the packages its third cell names in
// backticks (the imports it may make). dup lists the packages named by
// more than one row.
func packageMap(md string) (pkgs map[string][]string, dup []string) {
	pkgs = map[string][]string{}
	inTable := false
	for _, line := range section(md, "Package map") {
		cells := tableCells(line)
		if cells == nil {
			inTable = false
			continue
		}
		if !inTable {
			inTable = len(cells) >= 3 && cells[0] == "package" // the header row
			continue
		}
		if strings.Trim(cells[0], "-: ") == "" || len(cells) < 3 {
			continue // the delimiter row
		}
		names := backticked(cells[0])
		if len(names) != 1 {
			continue
		}
		pkg := strings.TrimSuffix(names[0], "/")
		if _, ok := pkgs[pkg]; ok {
			dup = append(dup, pkg)
		}
		pkgs[pkg] = backticked(cells[2])
	}
	return pkgs, dup
}

// fuzzName matches a fuzz target's name in a document.
var fuzzName = regexp.MustCompile(`\bFuzz[A-Z0-9_]\w*`)

// fuzzList reads the list under "## Fuzzing" in docs/testing.md: each item
// ("- `pkg`: ..." and its indented continuation lines) gives, for the
// package its first backticked span names, the fuzz targets it names.
func fuzzList(md string) map[string][]string {
	out := map[string][]string{}
	pkg := ""
	for _, line := range section(md, "Fuzzing") {
		switch {
		case strings.HasPrefix(line, "- "):
			pkg = ""
			if names := backticked(line); len(names) > 0 {
				pkg = strings.TrimSuffix(names[0], "/")
			}
		case strings.HasPrefix(line, "  ") && pkg != "":
		default:
			pkg = ""
		}
		if pkg != "" {
			out[pkg] = append(out[pkg], fuzzName.FindAllString(line, -1)...)
		}
	}
	return out
}

// makeFuzzLine matches a command of the Makefile that runs one fuzz target:
// the -fuzz pattern's name, and the package's folder (./proxy/wire/).
var makeFuzzLine = regexp.MustCompile(`-fuzz\s+'?\^?(Fuzz\w+)\$*'?\s.*\s\./(\S*?)/?\s*$`)

// makeFuzzTargets reads the Makefile's fuzz commands: the targets each
// package's folder runs.
func makeFuzzTargets(makefile string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(makefile, "\n") {
		if m := makeFuzzLine.FindStringSubmatch(line); m != nil {
			out[m[2]] = append(out[m[2]], m[1])
		}
	}
	return out
}

// markdownLink matches a Markdown link or image: its target, before any
// title.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks returns the relative links of a Markdown file, outside its
// fenced code blocks: every link target but a URL with a scheme ("#x" is
// an anchor of the file itself).
func markdownLinks(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, target)
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: the heading's text lowercased, its letters, digits, spaces,
// hyphens and underscores kept, each space a hyphen; a repeated anchor gets
// "-1", "-2", ...
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if fenced || level < 1 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(line[level:])) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			anchor += "-" + strconv.Itoa(n)
		}
		seen[b.String()]++
		out[anchor] = true
	}
	return out
}

// issueNumber matches a citation of an issue by its number: the word issue
// or issues followed by a number, with or without "#" ("issue N's",
// "issues N and M", "Issue #N"), and a number after "#" in parentheses.
var issueNumber = regexp.MustCompile(`(?i)\bissues?\s*#?[0-9]+|\(#[0-9]+\)`)

// issueChecked reports whether a file of the repository (its path in it,
// with slashes) is held to the no-issue-number rule: the code, the docs,
// the configuration, build, CI and deployment files. Of the files without
// an extension only the Makefile, the Dockerfile and the CI's scripts are:
// the others are data (the fuzzers' corpora) or programs a build left.
func issueChecked(path string) bool {
	name := path[strings.LastIndex(path, "/")+1:]
	if !strings.Contains(name, ".") {
		return name == "Makefile" || name == "Dockerfile" || strings.HasPrefix(path, ".ci/")
	}
	switch name[strings.LastIndex(name, "."):] {
	case ".go", ".md", ".conf", ".sh", ".yml", ".yaml", ".service", ".txt", ".mod":
		return true
	}
	return false
}

// issueNumbersLeft lists, by path, the files that still cite an issue
// number, each with why it is not reworded yet. The test fails on any other
// file that does, and on a listed file that no longer does.
var issueNumbersLeft = map[string]string{}
