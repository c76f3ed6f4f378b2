package privilege

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The authentication plugins.
const (
	PluginSHA2   = "caching_sha2_password"
	PluginNative = "mysql_native_password"
)

// sha2Iterations is the PBKDF2 cost of a caching_sha2_password hash,
// MySQL's 5000 rounds of SHA-256. Only a login that misses the fast-path
// cache pays it.
const sha2Iterations = 5000

// Hash returns the stored form of password under plugin: for
// caching_sha2_password "$pbkdf2-sha256$<rounds>$<salt>$<key>" with a
// random 16-byte salt; for mysql_native_password "*" followed by
// SHA1(SHA1(password)) in hex, as MySQL stores it (that protocol needs
// the unsalted double hash, which is why caching_sha2_password is the
// default). An empty password stores "".
func Hash(plugin, password string) (string, error) {
	if password == "" {
		return "", nil
	}
	switch plugin {
	case PluginNative:
		s1 := sha1.Sum([]byte(password))
		s2 := sha1.Sum(s1[:])
		return "*" + strings.ToUpper(hex.EncodeToString(s2[:])), nil
	case PluginSHA2, "":
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return "", err
		}
		key, err := pbkdf2.Key(sha256.New, password, salt, sha2Iterations, 32)
		if err != nil {
			return "", err
		}
		enc := base64.RawStdEncoding
		return fmt.Sprintf("$pbkdf2-sha256$%d$%s$%s", sha2Iterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
	}
	return "", fmt.Errorf("Plugin '%s' is not loaded", plugin)
}

// CheckHash validates a hash given with IDENTIFIED WITH plugin AS 'hash'.
func CheckHash(plugin, h string) error {
	if h == "" {
		return nil
	}
	switch plugin {
	case PluginNative:
		if _, err := NativeStage2(h); err == nil {
			return nil
		}
	case PluginSHA2, "":
		if _, _, _, err := parseSHA2(h); err == nil {
			return nil
		}
	}
	return errors.New("The password hash doesn't have the expected format.")
}

// NativeStage2 decodes a mysql_native_password hash into SHA1(SHA1(pw)).
func NativeStage2(h string) ([]byte, error) {
	if len(h) != 41 || h[0] != '*' {
		return nil, errors.New("not a mysql_native_password hash")
	}
	return hex.DecodeString(h[1:])
}

func parseSHA2(h string) (iter int, salt, key []byte, err error) {
	parts := strings.Split(h, "$")
	if len(parts) != 5 || parts[0] != "" || parts[1] != "pbkdf2-sha256" {
		return 0, nil, nil, errors.New("not a caching_sha2_password hash")
	}
	if iter, err = strconv.Atoi(parts[2]); err != nil || iter <= 0 {
		return 0, nil, nil, errors.New("bad round count")
	}
	enc := base64.RawStdEncoding
	if salt, err = enc.DecodeString(parts[3]); err != nil {
		return 0, nil, nil, err
	}
	if key, err = enc.DecodeString(parts[4]); err != nil {
		return 0, nil, nil, err
	}
	return iter, salt, key, nil
}

// VerifyPassword reports whether password is the account's. An account
// without a password accepts only the empty one.
func VerifyPassword(a *Account, password string) bool {
	if a.Auth == "" {
		return password == ""
	}
	if password == "" {
		return false
	}
	if a.Plugin == PluginNative {
		want, err := NativeStage2(a.Auth)
		if err != nil {
			return false
		}
		s1 := sha1.Sum([]byte(password))
		s2 := sha1.Sum(s1[:])
		return subtle.ConstantTimeCompare(s2[:], want) == 1
	}
	iter, salt, key, err := parseSHA2(a.Auth)
	if err != nil {
		return false
	}
	got, err := pbkdf2.Key(sha256.New, password, salt, iter, len(key))
	return err == nil && subtle.ConstantTimeCompare(got, key) == 1
}

// FastDigest is SHA256(SHA256(password)), what the caching_sha2_password
// fast path verifies a client's scramble against. It is kept only in
// memory, after a full authentication proved the password.
func FastDigest(password string) []byte {
	s1 := sha256.Sum256([]byte(password))
	s2 := sha256.Sum256(s1[:])
	return s2[:]
}
