package web

import (
	"bytes"
	"context"
	"io"

	"github.com/a-h/templ"

	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// rowCache keeps every row of a table rendered, keyed by the row's id and
// compared by its values: a table of which a few rows changed renders only
// those. The rows carry moments, not ages (views.Age), so an unchanged row
// stays unchanged while time passes. It is used by its panel's render only,
// under that partCache's lock.
type rowCache[R comparable] struct {
	id     func(R) string
	render func(R) templ.Component
	rows   map[string]cachedRow[R]
	pass   uint64
	// ids are the rows' ids in the last body's order; changed the rows it
	// rendered, and sameIDs whether its ids were the body's before.
	ids     []string
	changed [][]byte
	sameIDs bool
	// renders counts the rows rendered (tests read it).
	renders int
}

type cachedRow[R comparable] struct {
	row  R
	html []byte
	pass uint64 // of the last body that wrote it
}

func newRowCache[R comparable](id func(R) string, render func(R) templ.Component) *rowCache[R] {
	return &rowCache[R]{id: id, render: render, rows: map[string]cachedRow[R]{}}
}

// body is rows' HTML: each row written from the cache when its values are
// the cached ones, else rendered and cached. The rows of ids that are no
// longer in rows leave the cache.
func (c *rowCache[R]) body(rows []R) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		c.pass++
		kept := 0
		ids := make([]string, 0, len(rows))
		c.changed, c.sameIDs = c.changed[:0], c.pass > 1 && len(rows) == len(c.ids)
		for i, r := range rows {
			id := c.id(r)
			ids = append(ids, id)
			c.sameIDs = c.sameIDs && c.ids[i] == id
			e, ok := c.rows[id]
			if !ok || e.row != r {
				var buf bytes.Buffer
				if err := c.render(r).Render(ctx, &buf); err != nil {
					return err
				}
				// A fresh buffer: the bytes written before stay intact.
				e = cachedRow[R]{row: r, html: buf.Bytes()}
				c.renders++
				c.changed = append(c.changed, e.html)
			}
			if e.pass != c.pass {
				kept++
			}
			e.pass = c.pass
			c.rows[id] = e
			if _, err := w.Write(e.html); err != nil {
				return err
			}
		}
		c.ids = ids
		if len(c.rows) > kept {
			for id, e := range c.rows {
				if e.pass != c.pass {
					delete(c.rows, id)
				}
			}
		}
		return nil
	})
}

// patch is the rows the last body rendered (those whose values changed
// since the body before it) as a views.RowsPatch, or nil when a row came,
// went or moved since (the whole table must be sent) or none changed.
func (c *rowCache[R]) patch(ctx context.Context) ([]byte, error) {
	if !c.sameIDs || len(c.changed) == 0 {
		return nil, nil
	}
	rows := templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		for _, h := range c.changed {
			if _, err := w.Write(h); err != nil {
				return err
			}
		}
		return nil
	})
	var buf bytes.Buffer
	if err := views.RowsPatch(rows).Render(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
