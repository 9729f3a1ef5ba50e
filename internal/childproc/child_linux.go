// Package childproc ties a child process's life to its parent's: the
// servers that tests, the demo and the benches start die with them.
package childproc

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd's process get SIGKILL when the process that
// started it dies, so that a program or test that ends halfway (a crash, a
// timeout, an interrupt) leaves no server of its own running.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
