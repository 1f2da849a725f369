package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// readAdminToken sets f.adminToken from --admin-token-file or, without
// it, $FLEETDRILL_ADMIN_TOKEN. A token given as a flag (flagSet) is
// refused: every user of the machine sees it in a process listing.
func (f *nodeFlags) readAdminToken(flagSet bool) error {
	if flagSet {
		return fmt.Errorf("--admin-token is no longer taken: a token on the command line shows in every process listing; "+
			"set $%s or write it to a file (chmod 600) named by --admin-token-file", adminTokenEnv)
	}
	env := os.Getenv(adminTokenEnv)
	if f.adminTokenFile == "" {
		f.adminToken = env
		return nil
	}
	if env != "" {
		return fmt.Errorf("both $%s and --admin-token-file are set: give the token once", adminTokenEnv)
	}
	st, err := os.Stat(f.adminTokenFile)
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("--admin-token-file %s: mode %04o lets others than its owner read it: run chmod 600 %s", f.adminTokenFile, m, f.adminTokenFile)
	}
	b, err := os.ReadFile(f.adminTokenFile)
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	f.adminToken = strings.TrimSpace(string(b))
	if f.adminToken == "" {
		return errors.New("--admin-token-file " + f.adminTokenFile + ": empty")
	}
	return nil
}
