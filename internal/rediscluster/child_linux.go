package rediscluster

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd's process get SIGKILL when the process that
// started it dies, so that a program or test that ends without its Close
// (a crash, a timeout) leaves no node running.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
