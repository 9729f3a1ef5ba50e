package main

import (
	"os"
	"strings"
	"testing"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/service"
)

// readmeTable returns the rows of the first Markdown table after heading,
// each row as its trimmed cells.
func readmeTable(t *testing.T, readme, heading string) [][]string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no heading %q", heading)
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

// TestReadmeStrategiesMatchTheCode holds the README's strategy tables
// against the service's table of strategies: every strategy, in order, with
// its safe flag, and every one in the lock table.
func TestReadmeStrategiesMatchTheCode(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	served := service.StrategyTable()

	rows := readmeTable(t, readme, "## The strategies")
	if len(rows) != len(served) {
		t.Fatalf("README lists %d strategies; the service serves %d", len(rows), len(served))
	}
	for i, s := range served {
		name := strings.Trim(rows[i][0], "`")
		safe := rows[i][2] == "yes"
		if name != s.Name || safe != s.Safe {
			t.Errorf("README row %d = %s (safe %t); the service serves %s (safe %t)", i+1, name, safe, s.Name, s.Safe)
		}
	}

	locks := map[string]bool{}
	for _, row := range readmeTable(t, readme, "### Every lock side by side") {
		locks[strings.Trim(row[0], "`")] = true
	}
	for _, name := range service.StrategyNames() {
		if !locks[name] {
			t.Errorf("README's lock table has no row for %s", name)
		}
	}
}

// TestReadmeConfigurationMatchesTheCode checks that the README's
// configuration table names exactly the variables config.Load reads.
func TestReadmeConfigurationMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	if _, err := config.Load(func(k string) string { read[k] = true; return "" }, false); err != nil {
		t.Fatalf("config.Load(empty) = %v", err)
	}
	documented := map[string]bool{}
	for _, row := range readmeTable(t, string(b), "### Configuration") {
		documented[strings.Trim(row[0], "`")] = true
	}
	for k := range read {
		if !documented[k] {
			t.Errorf("config reads %s; the README's table does not document it", k)
		}
	}
	for k := range documented {
		if !read[k] {
			t.Errorf("the README documents %s; config does not read it", k)
		}
	}
}
