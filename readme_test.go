package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/service"
)

// readmeTable returns the rows of the first Markdown table after heading in
// a Markdown page (the README or a page of docs/), each row as its trimmed
// cells.
func readmeTable(t *testing.T, readme, heading string) [][]string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("the page has no heading %q", heading)
	}
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(readme[i+len(heading)+2:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	return rows[1:] // without the header
}

// TestReadmeStrategiesMatchTheCode holds the strategy tables of
// docs/locks.md against the service's table of strategies: every strategy,
// in order, with its safe flag, and every one in the lock table.
func TestReadmeStrategiesMatchTheCode(t *testing.T) {
	b, err := os.ReadFile("docs/locks.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	served := service.StrategyTable()

	rows := readmeTable(t, readme, "## The strategies")
	if len(rows) != len(served) {
		t.Fatalf("docs/locks.md lists %d strategies; the service serves %d", len(rows), len(served))
	}
	for i, s := range served {
		name := strings.Trim(rows[i][0], "`")
		safe := rows[i][2] == "yes"
		if name != s.Name || safe != s.Safe {
			t.Errorf("docs/locks.md row %d = %s (safe %t); the service serves %s (safe %t)", i+1, name, safe, s.Name, s.Safe)
		}
	}

	locks := map[string]bool{}
	for _, row := range readmeTable(t, readme, "## Every lock side by side") {
		locks[strings.Trim(row[0], "`")] = true
	}
	for _, name := range service.StrategyNames() {
		if !locks[name] {
			t.Errorf("docs/locks.md's lock table has no row for %s", name)
		}
	}
}

// TestReadmeConfigurationMatchesTheCode checks that the configuration
// table of docs/operating.md names exactly the variables config.Load reads.
func TestReadmeConfigurationMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile("docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	if _, err := config.Load(func(k string) string { read[k] = true; return "" }, false); err != nil {
		t.Fatalf("config.Load(empty) = %v", err)
	}
	documented := map[string]bool{}
	for _, row := range readmeTable(t, string(b), "## Configuration") {
		documented[strings.Trim(row[0], "`")] = true
	}
	for k := range read {
		if !documented[k] {
			t.Errorf("config reads %s; the table of docs/operating.md does not document it", k)
		}
	}
	for k := range documented {
		if !read[k] {
			t.Errorf("docs/operating.md documents %s; config does not read it", k)
		}
	}
}

// readmeSection returns the README's text from heading to the next heading
// of the same or a higher level.
func readmeSection(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("the page has no heading %q", heading)
	}
	level := strings.Index(heading, " ") // the number of #
	rest := readme[i+len(heading)+2:]
	fenced := false
	end := 0
	for l := range strings.Lines(rest) {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if n := len(l) - len(strings.TrimLeft(l, "#")); !fenced && n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return rest[:end]
		}
		end += len(l)
	}
	return rest
}

// shBlocks returns the ```sh code blocks of text, in order.
func shBlocks(text string) []string {
	var blocks []string
	for {
		i := strings.Index(text, "```sh\n")
		if i < 0 {
			return blocks
		}
		text = text[i+len("```sh\n"):]
		j := strings.Index(text, "```")
		if j < 0 {
			return blocks
		}
		blocks = append(blocks, text[:j])
		text = text[j:]
	}
}

// shCommands returns the commands of a shell block, continuation lines
// joined, comments and blank lines left out.
func shCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for l := range strings.Lines(block) {
		l = strings.TrimRight(l, "\n")
		if cur.Len() == 0 && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(rest)
			continue
		}
		cur.WriteString(l)
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	return cmds
}

// runSettings returns the variables each `go run .` command of the README's
// "Running the service" sets, in order.
func runSettings(t *testing.T, readme string) []map[string]string {
	t.Helper()
	var runs []map[string]string
	for _, block := range shBlocks(readmeSection(t, readme, "## Running the service")) {
		for _, cmd := range shCommands(block) {
			if env, ok := goRunSettings(t, cmd); ok {
				runs = append(runs, env)
			}
		}
	}
	return runs
}

// goRunSettings returns the variables a `go run .` command sets; false
// when cmd is another command.
func goRunSettings(t *testing.T, cmd string) (map[string]string, bool) {
	t.Helper()
	words := strings.Fields(cmd)
	at := slices.Index(words, "go")
	if at < 0 || at+2 >= len(words) || words[at+1] != "run" || words[at+2] != "." {
		return nil, false
	}
	env := map[string]string{}
	for _, w := range words[:at] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("%q before `go run .` is not NAME=value", w)
		}
		env[k] = strings.Trim(v, `'"`)
	}
	return env, true
}

// saleStep is one command of the README's curl sale and the comment lines
// right under it: what it prints.
type saleStep struct {
	command string
	want    []string
}

// saleSteps splits the README's curl sale into its steps. A comment before
// a command says what it does; the comments right under it are its answer.
func saleSteps(block string) []saleStep {
	var steps []saleStep
	var cmd strings.Builder
	under := false // the lines are right under a command
	for l := range strings.Lines(block) {
		l = strings.TrimRight(l, "\n")
		switch {
		case strings.TrimSpace(l) == "":
			under = false
		case strings.HasPrefix(l, "#"):
			if under {
				s := &steps[len(steps)-1]
				s.want = append(s.want, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
			}
		default:
			if strings.HasSuffix(l, "\\") {
				cmd.WriteString(l + "\n") // as written: the shell joins the lines
				continue
			}
			cmd.WriteString(l)
			steps = append(steps, saleStep{command: cmd.String()})
			cmd.Reset()
			under = true
		}
	}
	return steps
}

// answerMatches reports whether a printed line matches a README comment:
// the same words, where "..." stands for any text.
func answerMatches(want, got string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	pattern := strings.ReplaceAll(regexp.QuoteMeta(norm(want)), `\.\.\.`, `.*`)
	return regexp.MustCompile(`^` + pattern + `$`).MatchString(norm(got))
}

// TestReadmeSale runs the README's curl sale as written against an instance
// started with the settings of the README's run commands, on the embedded
// stores and on real ones, and holds what each command prints against the
// comment under it.
func TestReadmeSale(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "seq", "xargs", "sort", "uniq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's sale needs %s: %v", tool, err)
		}
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const base = "http://127.0.0.1:8080"
	var sale string
	for _, block := range shBlocks(readmeSection(t, readme, "## Running the service")) {
		if strings.Contains(block, "curl") && strings.Contains(block, "/purchase") {
			sale = block
		}
	}
	steps := saleSteps(sale)
	if len(steps) < 5 {
		t.Fatalf("README's curl sale has %d steps; want the sale", len(steps))
	}
	runs := runSettings(t, readme)
	if len(runs) != 2 {
		t.Fatalf("README's Running the service has %d `go run .` commands; want 2 (embedded, real stores)", len(runs))
	}
	if runs[0]["SECKILL_MYSQL_DSN"] != "" || runs[1]["SECKILL_MYSQL_DSN"] == "" || runs[1]["SECKILL_REDIS_ADDRS"] == "" {
		t.Fatalf("README's run commands set %v; want the embedded stores first, then real ones", runs)
	}
	for i, name := range []string{"embedded", "real"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := maps.Clone(runs[i])
			if name == "real" {
				// The harness's stores in place of the README's: a database of
				// the test's own, Redis nodes of its own (the program uses the
				// default key prefix).
				delete(env, "SECKILL_MYSQL_DSN")
				delete(env, "SECKILL_REDIS_ADDRS")
			} else {
				// The embedded stores, which the harness would fill in.
				env["SECKILL_MYSQL_DSN"], env["SECKILL_REDIS_ADDRS"] = "", ""
			}
			p := apptest.Run(t, run, env)
			playSale(t, steps, strings.NewReplacer(base, p.URL))
		})
	}
}

// playSale runs a curl sale's steps in one shell, as written but for what
// replace changes, and holds what each step prints against the comment
// under it.
func playSale(t *testing.T, steps []saleStep, replace *strings.Replacer) {
	t.Helper()
	const marker = "--- end of step ---"
	var script strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&script, "%s\necho '%s'\n", replace.Replace(s.command), marker)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("the sale: %v\n%s", err, out)
	}
	printed := strings.Split(string(out), marker+"\n")
	for j, s := range steps {
		var got []string
		if j < len(printed) {
			got = strings.Split(strings.TrimSuffix(printed[j], "\n"), "\n")
			if len(got) == 1 && got[0] == "" {
				got = nil
			}
		}
		ok := len(got) == len(s.want)
		for k := 0; ok && k < len(got); k++ {
			ok = answerMatches(s.want[k], got[k])
		}
		if !ok {
			t.Errorf("step\n%s\nprinted\n%s\nwant (the page's comment)\n%s",
				s.command, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
}

// TestOperatingTokenSale runs docs/operating.md's sale with buyers' tokens
// as written: the driver's key and JWK Set, an instance under
// SECKILL_BUYER_AUTH=jwt with the settings of its run command (on the
// harness's stores), then the curl sale, each answer held against the
// comment under its command.
func TestOperatingTokenSale(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlocks(readmeSection(t, string(b), "### A sale with buyers' tokens"))
	if len(blocks) != 2 {
		t.Fatalf("the sale with buyers' tokens has %d shell blocks; want 2 (the key and the service, the sale)", len(blocks))
	}
	start := shCommands(blocks[0])
	if len(start) != 2 || !strings.HasPrefix(start[0], "go run ./loadtest -keygen keys") {
		t.Fatalf("the sale's first block is %q; want the driver's -keygen keys, then the service", start)
	}
	// The page's keys/ is the test's own directory.
	dir := t.TempDir()
	keys := strings.NewReplacer("keys/", dir+"/", "-keygen keys", "-keygen "+dir)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", "-c", keys.Replace(start[0])).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", start[0], err, out)
	}
	env, ok := goRunSettings(t, start[1])
	if !ok || env["SECKILL_BUYER_AUTH"] != "jwt" {
		t.Fatalf("the sale's service is started by %q; want `go run .` under SECKILL_BUYER_AUTH=jwt", start[1])
	}
	for k, v := range env {
		env[k] = keys.Replace(v)
	}
	p := apptest.Run(t, run, env)
	playSale(t, saleSteps(blocks[1]), strings.NewReplacer("http://127.0.0.1:8080", p.URL, "keys/", dir+"/"))
}

// TestReadmeDriverCommands: the README's load driver commands talk to the
// service its run commands start, with their admin token.
func TestReadmeDriverCommands(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	runs := runSettings(t, readme)
	if len(runs) == 0 {
		t.Fatal("README has no `go run .` command")
	}
	for _, run := range runs {
		if run["SECKILL_STRATEGY_OVERRIDE"] != "true" {
			t.Errorf("README: the run command with %v does not set SECKILL_STRATEGY_OVERRIDE=true, which the driver needs", run)
		}
	}
	n := 0
	for _, block := range shBlocks(readmeSection(t, readme, "## The load driver")) {
		for _, cmd := range shCommands(block) {
			if !strings.HasPrefix(cmd, "go run ./loadtest ") {
				continue
			}
			n++
			flags := map[string]string{}
			words := strings.Fields(cmd)[3:]
			for k := 0; k+1 < len(words); k += 2 {
				flags[words[k]] = words[k+1]
			}
			for _, run := range runs {
				if flags["-admin-token"] != run["SECKILL_ADMIN_TOKEN"] || flags["-url"] != "http://127.0.0.1:8080" {
					t.Errorf("README: %q; want -url http://127.0.0.1:8080 -admin-token %s, as the run commands give",
						cmd, run["SECKILL_ADMIN_TOKEN"])
				}
			}
		}
	}
	if n == 0 {
		t.Error("README's load driver section has no `go run ./loadtest` command")
	}
}

// mdLink is a Markdown link or image outside code: [text](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// TestDocsLinks holds every relative link of the README and of docs/ to a
// file that exists and, where it names an anchor, to a heading of that file
// (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range pageLinks(string(b)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			checked++
			body, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(string(body)), anchor) {
				t.Errorf("%s links to %s: %s has no heading with that anchor", page, target, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in the README and docs/")
	}
}

// pageLinks returns the targets of the links of a Markdown page, code
// blocks and code spans left out.
func pageLinks(page string) []string {
	var targets []string
	fenced := false
	for l := range strings.Lines(page) {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		parts := strings.Split(l, "`")
		for i := 0; i < len(parts); i += 2 { // outside code spans
			for _, m := range mdLink.FindAllStringSubmatch(parts[i], -1) {
				targets = append(targets, m[1])
			}
		}
	}
	return targets
}

// headingAnchors returns the anchors GitHub makes for a page's headings.
func headingAnchors(page string) []string {
	var anchors []string
	fenced := false
	for l := range strings.Lines(page) {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors = append(anchors, b.String())
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	page := "# Locks\n## Fencing: what it guarantees and what it does not\n```\n# not a heading\n```\n### `go run . demo`\n"
	got := headingAnchors(page)
	want := []string{"locks", "fencing-what-it-guarantees-and-what-it-does-not", "go-run--demo"}
	if !slices.Equal(got, want) {
		t.Errorf("headingAnchors(...) = %q; want %q", got, want)
	}
}
