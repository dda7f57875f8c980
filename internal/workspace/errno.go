package workspace

import "syscall"

// syscallENOTDIR is returned by Lstat when a middle component is a regular file; the
// remaining components then cannot exist.
var syscallENOTDIR error = syscall.ENOTDIR
