package deploy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTestenvShowsSignsOfLife: scripts/testenv.sh, which make test runs
// go test under, says every TESTENV_HEARTBEAT seconds that its command
// still runs (go test prints nothing until a package is done), in plain
// lines a pipe or a log can hold, and stops saying it when the command
// ends.
func TestTestenvShowsSignsOfLife(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "../scripts/testenv.sh", "sleep", "2.5")
	cmd.Env = append(cmd.Environ(), "TESTENV_HEARTBEAT=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testenv.sh sleep 2.5 = %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "testenv: still running (sleep)"); n < 2 || strings.Contains(string(out), "\r") {
		t.Errorf("testenv.sh over 2.5 s at a heartbeat a second said it still runs %d times; want 2 or more, in plain lines:\n%s", n, out)
	}
}
