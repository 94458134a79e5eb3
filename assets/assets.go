// Package assets embeds the web consoles' static files: the stylesheet, the
// small websocket client and the favicon. Nothing is fetched from a CDN and
// there is no front-end build step: the files are served as written.
package assets

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the static files (app.css, live.js, favicon.svg) at its root.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The embedded tree is fixed at build time; this cannot fail.
		panic(err)
	}
	return sub
}
