package daemon

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/errandhq/errand/internal/config"
)

// TokenFile is the API token's file in $ERRAND_HOME.
const TokenFile = "token"

// loadToken returns the API token: from the variable auth.token_env
// names, else from $ERRAND_HOME/token, which the first start creates with
// 256 random bits, readable by its owner only.
func loadToken(home string, cfg *config.Config, lookup func(string) (string, bool)) (string, error) {
	if name := cfg.Auth.TokenEnv; name != "" {
		v, _ := lookup(name)
		if v = strings.TrimSpace(v); v == "" {
			return "", fmt.Errorf("auth.token_env names %s, which is not set or empty: set it to the API token", name)
		}
		return v, nil
	}
	path := filepath.Join(home, TokenFile)
	token, err := readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, err
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	token = base64.RawURLEncoding.EncodeToString(raw)
	// Write it whole under another name, then link it into place: a
	// reader never sees a half-written token, and if another daemon got
	// there first its token stands.
	tmp, err := os.CreateTemp(home, ".token-*")
	if err != nil {
		return "", fmt.Errorf("create the API token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(token + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readToken(path)
	} else if err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	return token, nil
}

func readToken(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("%s is readable by others and cannot be made private: %w", path, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the API token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s is empty: delete it and a new token is made at start", path)
	}
	return token, nil
}
