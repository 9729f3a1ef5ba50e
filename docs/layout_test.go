package docs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTestkitIsTestOnly holds what testing.md says of internal/testkit:
// only tests use it. No package outside it imports it from a file that is
// not a test (go list's Imports leave the _test.go files out), so that the
// folder tells the product from its test rig.
func TestTestkitIsTestOnly(t *testing.T) {
	t.Parallel()
	const module = "github.com/seckill/seckill"
	const kit = module + "/internal/testkit"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		seen++
		pkg := fields[0]
		if pkg == kit || strings.HasPrefix(pkg, kit+"/") {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == kit || strings.HasPrefix(imp, kit+"/") {
				t.Errorf("%s imports %s outside its tests: what ships cannot use the test rig (docs/testing.md)", pkg, imp)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list named %d packages; want the module's", seen)
	}
}
