package main

// The device manager's registration socket is fixed (/var/lib/kubelet/device-plugins/kubelet.sock),
// and its Start removes every socket in that directory: on a machine with a kubelet, or beside
// another harness, it must not be the real one. So the harness runs in a mount namespace of its own
// (as `unshare --mount`) with an empty tmpfs over /var/lib/kubelet's parent: init() starts the same
// program again in a new namespace and exits with its status; the child makes its mounts private and
// mounts the tmpfs. Without the rights for that (not root), the harness runs as before and the admit
// area answers every case with an error that says so.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

const privateEnv = "NUMALIGN_CONFORMANCE_PRIVATE_MOUNTS"

var (
	privateDevicePlugins bool
	privateReason        = "the harness could not make a mount namespace of its own"
)

func init() {
	if os.Getenv(privateEnv) == "1" {
		if err := privateMounts(); err != nil {
			privateReason = err.Error()
			return
		}
		privateDevicePlugins = true
		return
	}
	self, err := os.Executable()
	if err != nil {
		privateReason = err.Error()
		return
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), privateEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		// No new namespace (not root): answer here, without the admit area.
		privateReason = fmt.Sprintf("a new mount namespace was refused: %v; run the harness as root", err)
		return
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func privateMounts() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/var/lib", "tmpfs", 0, "mode=0755,size=64m"); err != nil {
		return fmt.Errorf("mounting a tmpfs over /var/lib: %w", err)
	}
	return os.MkdirAll("/var/lib/kubelet/device-plugins", 0o750)
}
