package pki

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// IssuedFile is the registry, in the PKI directory, of the member-cluster
// certificates `pki join` issued: which cluster id holds which role. Init
// starts it empty (a new CA invalidates every earlier certificate).
const IssuedFile = "issued.json"

// issuedLockFile serialises `pki join` runs on one PKI directory.
const issuedLockFile = ".issued.lock"

// maxIssuedSize bounds the registry read from disk (a 1-year certificate per
// cluster and re-issue: thousands of entries fit in well under this).
const maxIssuedSize = 16 << 20

// IssuedCert is one certificate recorded in the registry.
type IssuedCert struct {
	ClusterID string   `json:"clusterId"`
	Role      api.Role `json:"role"`
	// Serial is the certificate's serial number in hexadecimal.
	Serial   string    `json:"serial"`
	IssuedAt time.Time `json:"issuedAt"`
	NotAfter time.Time `json:"notAfter"`
}

// issuedRegistry is the content of IssuedFile.
type issuedRegistry struct {
	Certificates []IssuedCert `json:"certificates"`
}

// ReadIssued returns the certificates recorded in dir's registry, oldest
// first. A PKI directory without a registry (made before it existed) has
// none recorded.
func ReadIssued(dir string) ([]IssuedCert, error) {
	r, err := readIssued(dir)
	if err != nil {
		return nil, err
	}
	return r.Certificates, nil
}

func readIssued(dir string) (issuedRegistry, error) {
	var r issuedRegistry
	path := filepath.Join(dir, IssuedFile)
	data, err := readLimitedN(path, maxIssuedSize)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read the registry of issued certificates: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("the registry of issued certificates %s is damaged (%v): restore it from a backup; pki join refuses to issue certificates without it", path, err)
	}
	for i, c := range r.Certificates {
		if ValidateClusterID(c.ClusterID) != nil || validateRole(c.Role, false) != nil {
			return r, fmt.Errorf("the registry of issued certificates %s is damaged (entry %d: cluster id %q, role %q): restore it from a backup; pki join refuses to issue certificates without it", path, i, c.ClusterID, c.Role)
		}
	}
	return r, nil
}

func writeIssued(dir string, r issuedRegistry) error {
	if r.Certificates == nil {
		r.Certificates = []IssuedCert{}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the registry of issued certificates: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, IssuedFile), append(data, '\n'), 0o600)
}

// conflict returns the first certificate recorded for clusterID under a
// role other than role.
func (r issuedRegistry) conflict(clusterID string, role api.Role) (IssuedCert, bool) {
	for _, c := range r.Certificates {
		if c.ClusterID == clusterID && c.Role != role {
			return c, true
		}
	}
	return IssuedCert{}, false
}

// lockIssued takes an exclusive lock on dir's registry until the returned
// function is called, so concurrent `pki join` runs cannot lose an entry.
func lockIssued(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, issuedLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the registry of issued certificates: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the registry of issued certificates %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
