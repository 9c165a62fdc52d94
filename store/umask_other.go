//go:build !unix

package store

// privateFiles does nothing where there is no umask; restrictPermissions
// still tightens the files at Open and Close.
func privateFiles() {}
