package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
)

// secretSource is where a command takes a secret from: an environment
// variable, or a file that only its owner may read. Never a flag value:
// every user of the machine sees a command line in a process listing, so
// the flag that would take one exists only to be refused with directions.
type secretSource struct {
	env      string // the environment variable, e.g. FLEETDRILL_ADMIN_TOKEN
	fileFlag string // the flag naming a file, e.g. admin-token-file
	flag     string // the refused flag, e.g. admin-token
	what     string // "token", "API key": for the messages
	// minLen is the shortest secret taken; 0 takes any but an empty one.
	minLen int
	// wasTaken says the flag once took the secret: the refusal says "no
	// longer" to those whose scripts still give it.
	wasTaken bool
}

var (
	adminTokenSecret = secretSource{env: adminTokenEnv, fileFlag: "admin-token-file", flag: "admin-token",
		what: "token", wasTaken: true}
	// API keys are as long as the gateway's own: a short one is guessed.
	nodeAPIKeySecret = secretSource{env: nodeAPIKeyEnv, fileFlag: "api-key-file", flag: "api-key",
		what: "API key", minLen: gateway.MinKeyLength}
	backendKeySecret = secretSource{env: backendKeyEnv, fileFlag: "backend-key-file", flag: "backend-key",
		what: "API key", minLen: gateway.MinKeyLength}
)

// addFlags defines the file flag (into file) and the hidden, refused one
// (into refused, never read).
func (s *secretSource) addFlags(cmd *cobra.Command, file, refused *string, fileUsage string) {
	fl := cmd.Flags()
	fl.StringVar(refused, s.flag, "", fmt.Sprintf("refused: %s on the command line shows in every process listing (use $%s or --%s)",
		s.aWhat(), s.env, s.fileFlag))
	_ = fl.MarkHidden(s.flag)
	fl.StringVar(file, s.fileFlag, "", fileUsage)
}

// read returns the secret from file (the file flag's value) or, without
// one, from the environment: "" when neither gives one. flagSet says the
// refused flag was given. An error names the flag, the variable or the
// file, never the secret.
func (s *secretSource) read(file string, flagSet bool) (string, error) {
	if flagSet {
		taken := "not"
		if s.wasTaken {
			taken = "no longer"
		}
		return "", fmt.Errorf("--%s is %s taken: %s on the command line shows in every process listing; "+
			"set $%s or write it to a file (chmod 600) named by --%s", s.flag, taken, s.aWhat(), s.env, s.fileFlag)
	}
	env := os.Getenv(s.env)
	if file == "" {
		if env != "" && len(env) < s.minLen {
			return "", fmt.Errorf("$%s: %s", s.env, s.short())
		}
		return env, nil
	}
	if env != "" {
		return "", fmt.Errorf("both $%s and --%s are set: give the %s once", s.env, s.fileFlag, s.what)
	}
	st, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", s.fileFlag, err)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return "", fmt.Errorf("--%s %s: mode %04o lets others than its owner read it: run chmod 600 %s", s.fileFlag, file, m, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", s.fileFlag, err)
	}
	secret := strings.TrimSpace(string(b))
	switch {
	case secret == "":
		return "", fmt.Errorf("--%s %s: empty", s.fileFlag, file)
	case len(secret) < s.minLen:
		return "", fmt.Errorf("--%s %s: %s", s.fileFlag, file, s.short())
	}
	return secret, nil
}

// aWhat is what the secret is, with its article: "a token", "an API key".
func (s *secretSource) aWhat() string {
	if strings.ContainsRune("AEIOUaeiou", rune(s.what[0])) {
		return "an " + s.what
	}
	return "a " + s.what
}

// short is the complaint about a secret shorter than minLen, in the words
// of the gateway's keys file.
func (s *secretSource) short() string {
	return fmt.Sprintf("%s shorter than %d characters: use a random one, e.g. openssl rand -hex 24", s.what, s.minLen)
}

// readAdminToken sets f.adminToken from --admin-token-file or, without
// it, $FLEETDRILL_ADMIN_TOKEN (see secretSource).
func (f *nodeFlags) readAdminToken(flagSet bool) (err error) {
	f.adminToken, err = adminTokenSecret.read(f.adminTokenFile, flagSet)
	return err
}

// readAPIKey sets f.apiKey from --api-key-file or, without it,
// $FLEETDRILL_NODE_API_KEY (see secretSource).
func (f *nodeFlags) readAPIKey(flagSet bool) (err error) {
	f.apiKey, err = nodeAPIKeySecret.read(f.apiKeyFile, flagSet)
	return err
}
