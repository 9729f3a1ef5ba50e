package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd's process get SIGKILL when the process that
// started it dies, so that a test killed halfway (a timeout, an interrupt)
// leaves no server of its own running.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
