package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"sigs.k8s.io/yaml"
)

// Sources names the provider's configuration files. Each is optional. The
// sharing file holds everything; the reference's price, capacity and
// renewable files, when given, override their part of it.
type Sources struct {
	SharingFile   string
	PriceFile     string
	CapacityFile  string
	RenewableFile string
}

// Store holds the provider's effective sharing configuration. It re-reads
// its files when their content changes; a bad file is refused with an error
// and the last good configuration stays in force. Apply sets the
// configuration directly (the provider console) and persists it to the
// sharing file. Store is safe for concurrent use.
type Store struct {
	src Sources
	log *slog.Logger

	mu      sync.Mutex
	cfg     SharingConfig
	raw     map[string][]byte // last content read per file
	lastErr error
	changed chan struct{}
}

// NewStore loads the files; a file that cannot be read or parsed at start
// is an error (there is no last good configuration to keep).
func NewStore(src Sources, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{src: src, log: log, raw: map[string][]byte{}, changed: make(chan struct{}, 1)}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns a copy of the configuration in force.
func (s *Store) Config() SharingConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.DeepCopy()
}

// LastError is the error of the last refused file (nil when the files in
// force are the ones on disk).
func (s *Store) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Changed is signalled whenever the configuration in force changes.
func (s *Store) Changed() <-chan struct{} { return s.changed }

func (s *Store) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Apply validates cfg, writes it to the sharing file (when one is
// configured; atomically, so the file watcher never sees half a file) and
// puts it in force.
func (s *Store) Apply(cfg SharingConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid sharing configuration: %w", err)
	}
	cfg = cfg.DeepCopy()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.src.SharingFile != "" {
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("encoding the sharing configuration: %w", err)
		}
		if err := writeAtomic(s.src.SharingFile, data); err != nil {
			return fmt.Errorf("writing %s: %w", s.src.SharingFile, err)
		}
		s.raw[s.src.SharingFile] = data
	}
	s.cfg, s.lastErr = cfg, nil
	s.notify()
	return nil
}

// Reload re-reads the files. When none changed it does nothing. When one is
// bad it returns the error and keeps the configuration in force.
func (s *Store) Reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := map[string][]byte{}
	dirty := false
	for _, p := range []string{s.src.SharingFile, s.src.PriceFile, s.src.CapacityFile, s.src.RenewableFile} {
		if p == "" {
			continue
		}
		data, err := readFile(p)
		if err != nil {
			s.lastErr = err
			return false, err
		}
		read[p] = data
		if old, ok := s.raw[p]; !ok || !bytes.Equal(old, data) {
			dirty = true
		}
	}
	if !dirty {
		return false, s.lastErr
	}
	cfg, err := s.merge(read)
	if err != nil {
		s.lastErr = err
		s.log.Error("Refusing the new provider configuration; the last good one stays in force", "err", err)
		return false, err
	}
	s.raw, s.cfg, s.lastErr = read, cfg, nil
	s.notify()
	return true, nil
}

func (s *Store) merge(read map[string][]byte) (SharingConfig, error) {
	var cfg SharingConfig
	var err error
	if p := s.src.SharingFile; p != "" {
		if cfg, err = ParseSharing(read[p]); err != nil {
			return cfg, fmt.Errorf("%s: %w", p, err)
		}
	}
	if p := s.src.PriceFile; p != "" {
		if cfg.UnitPrices, err = ParsePrices(read[p]); err != nil {
			return cfg, fmt.Errorf("%s: %w", p, err)
		}
	}
	if p := s.src.CapacityFile; p != "" {
		if cfg.Capacity, err = ParseCapacity(read[p]); err != nil {
			return cfg, fmt.Errorf("%s: %w", p, err)
		}
	}
	if p := s.src.RenewableFile; p != "" {
		if cfg.Renewable, err = ParseRenewable(read[p]); err != nil {
			return cfg, fmt.Errorf("%s: %w", p, err)
		}
	}
	return cfg, nil
}

func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading the provider configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a configuration file", p, maxConfigFile)
	}
	return data, nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
