// Package docs holds gantry's documentation; its tests check that the
// README and the pages here hold together: every link and section they
// cite exists, and the README's first commands do what it says.
package docs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// pages are the Markdown files a reader follows links between.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "../BENCHMARKS.md"}
	more, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

var (
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A section cited by name in prose: section "Offline validation",
	// see "Exit codes".
	codeSpan = regexp.MustCompile("`[^`]*`")
	cited    = regexp.MustCompile(`(?i)(?:section|see) ["“]([^"”]+)["”]|README:? \*([^*]+)\*`)
)

// outsideCode is a page's text without its fenced blocks and code spans,
// where a link is not a link.
func outsideCode(text string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(codeSpan.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String()
}

// headings are a page's headings, as written and as GitHub's anchors.
func headings(text string) (titles, anchors map[string]bool) {
	titles, anchors = map[string]bool{}, map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		titles[title] = true
		anchors[slug(title)] = true
	}
	return titles, anchors
}

// slug is GitHub's anchor of a heading: lower case, punctuation but
// hyphens dropped, spaces as hyphens.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every link of the README and docs/ reaches a file that exists, and an
// anchor a heading of it; every section cited by name is a heading of
// some page.
func TestLinksAndSectionsResolve(t *testing.T) {
	t.Parallel()
	allTitles := map[string]bool{}
	texts := map[string]string{}
	for _, p := range pages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
		titles, _ := headings(string(b))
		for k := range titles {
			allTitles[k] = true
		}
	}
	checked := 0
	for page, text := range texts {
		prose := outsideCode(text)
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if info.IsDir() {
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if anchor != "" {
				if _, anchors := headings(string(b)); !anchors[anchor] {
					t.Errorf("%s links to %s: %s has no heading #%s", page, target, path, anchor)
				}
			}
		}
		for _, m := range cited.FindAllStringSubmatch(prose, -1) {
			checked++
			if title := m[1] + m[2]; !allTitles[title] {
				t.Errorf("%s cites the section %q, which no page has", page, title)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d links checked: the pages were not read", checked)
	}
}

// TestReadmeQuickPaths runs the README's tested commands as a new user
// would: in a fresh copy of the repository (its tracked files, committed
// once, as a clone has them), with the built binary on PATH as gantry, in
// a network namespace with no network when one can be made. Each command
// exits as its comment says (# exit N), else 0.
func TestReadmeQuickPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gantry")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := testedBlocks(string(readme))
	if len(blocks) < 2 {
		t.Fatalf("the README has %d tested blocks, want the quick paths", len(blocks))
	}

	bin := t.TempDir()
	// As the e2e tests build it, so that the build cache serves both.
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "gantry"), "github.com/gantry-dev/gantry")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	clone := freshCopy(t)
	isolate := []string{}
	if exec.Command("unshare", "--net", "--", "true").Run() == nil {
		isolate = []string{"unshare", "--net", "--"}
	}
	exitComment := regexp.MustCompile(`#.*\bexit (\d+)`)
	for _, block := range blocks {
		for _, line := range block {
			want := 0
			if m := exitComment.FindStringSubmatch(line); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
			args := append(append([]string{}, isolate...), "bash", "-c", line)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = clone
			cmd.Env = []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "NO_COLOR=1"}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != want {
				t.Errorf("%s\nexit %d, the README says %d:\n%s", line, code, want, out.String())
			}
		}
	}
}

// testedBlocks are the commands of the README's code blocks marked
// <!-- tested ... -->, one per line, comment-only lines left out.
func testedBlocks(readme string) [][]string {
	var blocks [][]string
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "<!-- tested") {
			continue
		}
		var block []string
		for i += 2; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "#") {
				block = append(block, l)
			}
		}
		blocks = append(blocks, block)
	}
	return blocks
}

// freshCopy is the repository's tracked files, as they are now, in a new
// git repository with one commit: what a clone holds.
func freshCopy(t *testing.T) string {
	t.Helper()
	files, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join("..", f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=reader@example.com", "-c", "user.name=reader", "commit", "-q", "-m", "clone"}} {
		if out, err := exec.Command("git", append([]string{"-C", dst}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dst
}

// The README's GitHub workflow passes actionlint, as a user would commit
// it.
func TestReadmeWorkflowPassesActionlint(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs actionlint, built by make tools")
	}
	actionlint, err := cluster.Tool("actionlint")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## On GitHub\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	workflow, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no GitHub workflow under On GitHub")
	}
	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	dir := filepath.Join(repo, ".github", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy.yml"), []byte(workflow), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(actionlint)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}

// goldenBlock is a fenced block a page marks <!-- golden: PATH -->: it
// shows a test's golden file (PATH, relative to the page) as it is.
var goldenBlock = regexp.MustCompile("(?m)^<!-- golden: (\\S+) -->\n```[a-z]*\n((?s:.*?))```\n")

// Every block a page shows from a golden file is that file as the tests
// write it now: the output the docs show is the output gantry gives.
func TestPagesShowTheirGoldens(t *testing.T) {
	t.Parallel()
	shown := 0
	for _, p := range pages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "<!-- golden:"); n != len(goldenBlock.FindAllIndex(b, -1)) {
			t.Errorf("%s: %d golden markers, not each before a fenced block", p, n)
		}
		for _, m := range goldenBlock.FindAllStringSubmatch(string(b), -1) {
			shown++
			want, err := os.ReadFile(filepath.Join(filepath.Dir(p), m[1]))
			if err != nil {
				t.Errorf("%s shows %s: %v", p, m[1], err)
				continue
			}
			if m[2] != string(want) {
				t.Errorf("%s shows %s, which the tests now write as:\n%s", p, m[1], want)
			}
		}
	}
	if shown == 0 {
		t.Error("no page shows a golden file: the markers were not found")
	}
}
