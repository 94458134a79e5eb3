package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/a-h/templ"

	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// tableCache keeps a big table of the live page (the providers', the
// consumers') rendered in pieces: its frame (the panel around the rows,
// rendered again only when the number of rows changes) and every row, keyed
// by the row's id and compared by its values. A table of which a few rows
// changed renders only those, and is handed out as its pieces (segments):
// a new table costs a slice of pointers, not a copy of every row. The rows
// carry moments, not ages (views.Age), so an unchanged row stays unchanged
// while time passes. Safe for concurrent use (the publisher and page
// loads).
type tableCache[R comparable] struct {
	id    func(R) string
	row   func(R) templ.Component
	frame func(n int, body templ.Component) templ.Component

	mu    sync.Mutex
	valid bool
	key   []R      // the rows of the last table (kept: not modified afterwards)
	html  segments // the last table: head, its rows, tail
	// head and tail are the frame around n rows.
	n          int
	head, tail []byte
	rows       map[string]cachedRow[R]
	pass       uint64
	// tables counts the tables made, renders the rows rendered (tests
	// read them).
	tables, renders int
}

type cachedRow[R comparable] struct {
	row  R
	html []byte
	pass uint64 // of the last table that held it
}

func newTableCache[R comparable](id func(R) string, row func(R) templ.Component, frame func(int, templ.Component) templ.Component) *tableCache[R] {
	return &tableCache[R]{id: id, row: row, frame: frame, rows: map[string]cachedRow[R]{}}
}

// get returns the table of rows: the last one when rows are the same, else
// one made of the cached rows and those rendered now. When the same rows
// are in the same order as before and only some changed, it is patchable by
// those rows (a views.RowsPatch); when a row came, went or moved, only the
// whole table will do.
func (c *tableCache[R]) get(ctx context.Context, rows []R) (templ.Component, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && slices.Equal(c.key, rows) {
		return c.html, nil
	}
	if !c.valid || c.n != len(rows) {
		if err := c.renderFrame(ctx, len(rows)); err != nil {
			c.valid = false
			return nil, err
		}
	}
	c.pass++
	html := make(segments, 0, len(rows)+2)
	html = append(html, c.head)
	sameIDs := c.valid && len(rows) == len(c.key)
	var changed [][]byte
	kept := 0
	for i, r := range rows {
		id := c.id(r)
		sameIDs = sameIDs && c.id(c.key[i]) == id
		e, ok := c.rows[id]
		if !ok || e.row != r {
			var buf bytes.Buffer
			if err := c.row(r).Render(ctx, &buf); err != nil {
				c.valid = false
				return nil, err
			}
			// A fresh buffer: the bytes handed out before stay intact.
			e = cachedRow[R]{row: r, html: buf.Bytes()}
			c.renders++
			changed = append(changed, e.html)
		}
		if e.pass != c.pass {
			kept++
		}
		e.pass = c.pass
		c.rows[id] = e
		html = append(html, e.html)
	}
	html = append(html, c.tail)
	if len(c.rows) > kept {
		for id, e := range c.rows {
			if e.pass != c.pass {
				delete(c.rows, id)
			}
		}
	}
	base, hadBase := c.html, c.valid
	c.valid, c.key, c.html = true, rows, html
	c.tables++
	if !hadBase || !sameIDs || len(changed) == 0 {
		return html, nil
	}
	var patch bytes.Buffer
	if err := views.RowsPatch(segments(changed)).Render(ctx, &patch); err != nil {
		c.valid = false
		return nil, err
	}
	return patchable{segments: html, base: base, patch: segments{patch.Bytes()}}, nil
}

// rowsMark stands for the rows in a rendered frame: it cannot appear in
// HTML that templ escaped.
const rowsMark = "\x00rows\x00"

// renderFrame renders the frame around n rows and cuts it at the rows.
func (c *tableCache[R]) renderFrame(ctx context.Context, n int) error {
	var buf bytes.Buffer
	mark := templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, rowsMark)
		return err
	})
	if err := c.frame(n, mark).Render(ctx, &buf); err != nil {
		return err
	}
	head, tail, ok := bytes.Cut(buf.Bytes(), []byte(rowsMark))
	if !ok {
		return fmt.Errorf("web: the table's template does not write its rows")
	}
	c.n, c.head, c.tail = n, head[:len(head):len(head)], tail
	return nil
}
