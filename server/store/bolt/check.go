package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DamagedError reports a database file that cannot be used as it is: empty,
// truncated, not a bbolt file, or with damaged pages. Nothing was changed
// on disk.
type DamagedError struct {
	Path   string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("store %s is damaged: %s", e.Path, e.Reason)
}

func damaged(path, format string, args ...any) *DamagedError {
	return &DamagedError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// bbolt's on-disk format (go.etcd.io/bbolt internal/common, format version
// 2): every page starts with a 16-byte header (id, flags, count,
// overflow); pages 0 and 1 hold the meta, whose last field is an FNV-64a
// checksum of the fields before it.
const (
	pageHeaderSize = 16
	metaSize       = 64 // magic, version, pageSize, flags, root (2×8), freelist, pgid, txid, checksum
	metaSumOffset  = 56
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	noFreelist     = ^uint64(0)
	// minPages is what bbolt writes for a new database: two metas, a
	// freelist and an empty root leaf.
	minPages = 4
)

// ne reads bbolt's structs, which it writes in host order.
var ne = binary.NativeEndian

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// parseMeta decodes and validates the meta page at off of f.
func parseMeta(f io.ReaderAt, off int64) (meta, error) {
	var b [metaSize]byte
	if _, err := f.ReadAt(b[:], off+pageHeaderSize); err != nil {
		return meta{}, fmt.Errorf("reading the meta page at byte %d: %w", off, err)
	}
	if ne.Uint32(b[0:]) != boltMagic {
		return meta{}, errors.New("no bbolt magic number")
	}
	if v := ne.Uint32(b[4:]); v != boltVersion {
		return meta{}, fmt.Errorf("format version %d, this broker reads %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(b[:metaSumOffset])
	if h.Sum64() != ne.Uint64(b[metaSumOffset:]) {
		return meta{}, errors.New("checksum mismatch")
	}
	return meta{
		pageSize: ne.Uint32(b[8:]), root: ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]),
		pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:]),
	}, nil
}

// checkFile checks an existing database file with plain reads, before bbolt
// maps it into memory: bbolt trusts what its pages say, and touching a page
// beyond the end of a truncated file kills the process with SIGBUS, a wild
// page id or key offset with SIGSEGV or a panic on one of its goroutines.
// It checks the meta pages and the file size, then every page of the tree
// (verifyPages). A missing file is fine (a new store); an I/O error is
// returned as is; anything bbolt could not open safely is a *DamagedError.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	size := st.Size()
	if size == 0 {
		return damaged(path, "the file is empty (0 bytes): it was truncated, or the broker stopped while creating it")
	}
	if size < pageHeaderSize+metaSize {
		return damaged(path, "the file is %d bytes, too short for a bbolt database (truncated?)", size)
	}
	m, err := currentMeta(f, path)
	if err != nil {
		return err
	}
	if err := checkMeta(path, m, size); err != nil {
		return err
	}
	return verifyPages(f, path, m)
}

// currentMeta is the meta page bbolt would use: the valid one with the
// higher transaction id. Like bbolt, the page size comes from the first
// meta page, else the second one is looked for at the OS page size.
func currentMeta(f *os.File, path string) (meta, error) {
	m0, err0 := parseMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := parseMeta(f, pageSize)
	if err0 != nil && err1 != nil {
		return meta{}, damaged(path, "neither meta page is valid (page 0: %v; page 1: %v): not a bbolt database, or its first pages are overwritten", err0, err1)
	}
	if err0 != nil || (err1 == nil && m1.txid > m0.txid) {
		return m1, nil
	}
	return m0, nil
}

// checkMeta checks that meta page m fits a file of size bytes: a sane page
// size and page count, and the root and freelist among the pages in use.
func checkMeta(path string, m meta, size int64) error {
	ps := int64(m.pageSize)
	if ps < 512 || ps > 1<<20 || ps&(ps-1) != 0 {
		return damaged(path, "the meta page gives a page size of %d bytes", ps)
	}
	if m.pgid < minPages || m.pgid > uint64(1<<62)/uint64(ps) {
		return damaged(path, "the meta page counts %d pages", m.pgid)
	}
	if need := int64(m.pgid) * ps; size < need {
		return damaged(path, "the file is %d bytes but its meta page counts %d pages of %d bytes (%d bytes): it was truncated", size, m.pgid, ps, need)
	}
	if m.root < 2 || m.root >= m.pgid {
		return damaged(path, "the root bucket is on page %d, outside the %d pages in use", m.root, m.pgid)
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		return damaged(path, "the freelist is on page %d, outside the %d pages in use", m.freelist, m.pgid)
	}
	return nil
}

// Page and element layout (go.etcd.io/bbolt internal/common): header
// {id uint64, flags uint16, count uint16, overflow uint32}; a branch
// element {pos, ksize uint32, pgid uint64}, a leaf element {flags, pos,
// ksize, vsize uint32}, pos counted from the element itself; a bucket's
// value {root pgid, sequence uint64} followed, when root is 0, by an
// inline page.
const (
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	elementSize      = 16
	bucketHeaderSize = 16
	// maxDepth bounds the nesting of pages and buckets walked (the broker's
	// trees are 3 or 4 deep).
	maxDepth = 64
)

// pageWalker reads pages with plain reads and checks every offset bbolt
// will follow through its memory map and every invariant its own
// consistency check asserts: page ids, types, element counts, keys and
// values within their page, keys in order, child pages below the
// high-water mark and referenced once (so a loop cannot make anything walk
// forever).
type pageWalker struct {
	f    io.ReaderAt
	path string
	m    meta
	ps   int64
	seen map[uint64]bool
}

// verifyPages walks the tree of meta m, from the root bucket through every
// nested bucket, and the freelist page if there is one. bbolt itself is not
// asked: with the freelist not stored, its read-write open rebuilds it by
// walking the tree on a goroutine of its own, where a wild page id or key
// offset is a SIGSEGV or a panic no recover reaches, and its consistency
// check does the same. Once verifyPages passed, that walk finds nothing.
func verifyPages(f io.ReaderAt, path string, m meta) error {
	w := &pageWalker{f: f, path: path, m: m, ps: int64(m.pageSize), seen: map[uint64]bool{}}
	if err := w.page(m.root, nil, nil, 0); err != nil {
		return err
	}
	if m.freelist == noFreelist {
		return nil
	}
	p, err := w.read(m.freelist)
	if err != nil {
		return err
	}
	if flags := ne.Uint16(p[8:]); flags != freelistPageFlag {
		return damaged(path, "page %d should be the freelist but has flags %#x", m.freelist, flags)
	}
	n, off := uint64(ne.Uint16(p[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF {
		n, off = ne.Uint64(p[pageHeaderSize:]), off+8
	}
	if n > (uint64(len(p))-off)/8 {
		return damaged(path, "the freelist page %d lists %d pages, more than it holds", m.freelist, n)
	}
	for i := range n {
		id := ne.Uint64(p[off+8*i:])
		if id < 2 || id >= m.pgid || w.seen[id] {
			return damaged(path, "the freelist lists page %d, which is in use, listed twice or outside the %d pages in use", id, m.pgid)
		}
		w.seen[id] = true
	}
	return nil
}

// read returns page id with its overflow pages, once.
func (w *pageWalker) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.m.pgid {
		return nil, damaged(w.path, "a page refers to page %d, outside the %d pages in use", id, w.m.pgid)
	}
	var hdr [pageHeaderSize]byte
	if _, err := w.f.ReadAt(hdr[:], int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("reading page %d of %s: %w", id, w.path, err)
	}
	if got := ne.Uint64(hdr[0:]); got != id {
		return nil, damaged(w.path, "page %d says it is page %d", id, got)
	}
	overflow := uint64(ne.Uint32(hdr[12:]))
	if id+overflow >= w.m.pgid {
		return nil, damaged(w.path, "page %d spans %d more pages, past the %d pages in use", id, overflow, w.m.pgid)
	}
	for i := range overflow + 1 {
		if w.seen[id+i] {
			return nil, damaged(w.path, "page %d is used twice", id+i)
		}
		w.seen[id+i] = true
	}
	p := make([]byte, int64(overflow+1)*w.ps)
	if _, err := w.f.ReadAt(p, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("reading page %d of %s: %w", id, w.path, err)
	}
	return p, nil
}

// page checks the tree rooted at page id, whose keys must lie in [lo, hi)
// (nil: unbounded).
func (w *pageWalker) page(id uint64, lo, hi []byte, depth int) error {
	p, err := w.read(id)
	if err != nil {
		return err
	}
	return w.node(p, fmt.Sprintf("page %d", id), lo, hi, depth)
}

// node checks one branch or leaf page p (a page of the file or an inline
// bucket's page) and what it refers to.
func (w *pageWalker) node(p []byte, where string, lo, hi []byte, depth int) error {
	if depth > maxDepth {
		return damaged(w.path, "%s: the tree is more than %d levels deep", where, maxDepth)
	}
	if len(p) < pageHeaderSize {
		return damaged(w.path, "%s: an inline page shorter than its header", where)
	}
	flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return damaged(w.path, "%s: flags %#x, neither a branch nor a leaf page", where, flags)
	}
	if flags == branchPageFlag && count == 0 {
		return damaged(w.path, "%s: a branch page without elements", where)
	}
	if pageHeaderSize+count*elementSize > len(p) {
		return damaged(w.path, "%s: %d elements do not fit in %d bytes", where, count, len(p))
	}
	elems, err := w.elements(p, where, flags == branchPageFlag, count, lo, hi)
	if err != nil {
		return err
	}
	for i, el := range elems {
		var err error
		switch {
		case flags == branchPageFlag:
			next := hi
			if i+1 < len(elems) {
				next = elems[i+1].key
			}
			err = w.page(el.child, el.key, next, depth+1)
		case el.flags&bucketLeafFlag == 0:
		case len(el.val) < bucketHeaderSize:
			err = damaged(w.path, "%s: element %d is a bucket with a %d-byte header", where, i, len(el.val))
		case ne.Uint64(el.val) != 0:
			err = w.page(ne.Uint64(el.val), nil, nil, depth+1)
		default:
			err = w.node(el.val[bucketHeaderSize:], where+" (inline bucket)", nil, nil, depth+1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// element is one element of a branch or leaf page.
type element struct {
	key, val []byte
	flags    uint32
	child    uint64
}

// elements reads the count elements of page p, each inside the page and
// their keys strictly ascending within [lo, hi) (nil: unbounded).
func (w *pageWalker) elements(p []byte, where string, branch bool, count int, lo, hi []byte) ([]element, error) {
	elems := make([]element, count)
	for i := range elems {
		e := pageHeaderSize + i*elementSize
		var pos, klen, vlen uint64
		if branch {
			pos, klen = uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
			elems[i].child = ne.Uint64(p[e+8:])
		} else {
			elems[i].flags = ne.Uint32(p[e:])
			pos, klen, vlen = uint64(ne.Uint32(p[e+4:])), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		}
		if uint64(e)+pos+klen+vlen > uint64(len(p)) {
			return nil, damaged(w.path, "%s: element %d points past the end of its page", where, i)
		}
		k := uint64(e) + pos
		elems[i].key, elems[i].val = p[k:k+klen], p[k+klen:k+klen+vlen]
		switch {
		case i == 0 && lo != nil && bytes.Compare(elems[i].key, lo) < 0:
			return nil, damaged(w.path, "%s: key %d sorts before its parent's", where, i)
		case i > 0 && bytes.Compare(elems[i-1].key, elems[i].key) >= 0:
			return nil, damaged(w.path, "%s: key %d is not after key %d", where, i, i-1)
		case hi != nil && bytes.Compare(elems[i].key, hi) >= 0:
			return nil, damaged(w.path, "%s: key %d sorts after its parent's next key", where, i)
		}
	}
	return elems, nil
}

// lockFile takes the exclusive lock bbolt takes on path (flock), waiting
// up to timeout, so a damaged file is never judged or moved while another
// broker has it open. It returns nil, nil when path does not exist. The
// lock is released by closing the file, before bbolt opens it (flock locks
// of two descriptors conflict even within one process).
func lockFile(path string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("open store %s (is another broker using this data dir?): locking: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond) // bbolt polls its lock the same way
	}
}

// moveAside renames a damaged file to <path>.damaged-<UTC time> and syncs
// the directory; it returns the new name.
func moveAside(path string, now time.Time) (string, error) {
	to := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	if _, err := os.Lstat(to); err == nil {
		to += fmt.Sprintf(".%d", now.UnixNano())
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("moving the damaged store aside: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return to, nil
}
