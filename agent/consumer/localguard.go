package consumer

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// localGuard keeps web pages away from the local API. The API has no
// authentication: it trusts whoever can reach its (loopback) address, which
// includes every web page open in a browser on the same host. A page can
// send a "simple" cross-origin POST without a preflight (text/plain, form
// encodings) and, through DNS rebinding (a name of the attacker's that
// resolves to 127.0.0.1), even read the answers. So the guard refuses:
//
//   - a Host header that names anything but a loopback name, the IP the
//     connection was made to, or one of the extra names (a DNS-rebinding
//     page always sends its own name): 403 Forbidden;
//   - a request marked cross-site or same-site by the browser
//     (Sec-Fetch-Site), or whose Origin is not this very origin: 403;
//   - a request body that is not declared application/json (a page cannot
//     send that cross-origin without a CORS preflight, which the API never
//     answers): 415.
//
// The adapter (a Go HTTP client) sends none of the browser headers, the
// address it dialled as Host and Content-Type: application/json.
func localGuard(extraHosts []string, next http.Handler) http.Handler {
	extra := make(map[string]bool, len(extraHosts))
	for _, h := range extraHosts {
		extra[normalizeHost(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r, extra) {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "Host "+quote(r.Host)+
				" is not an address of this local API: call it by a loopback name or IP (e.g. 127.0.0.1), "+
				"the IP it listens on, or a name given to --local-api-allowed-hosts (refused to keep DNS-rebinding web pages out)", "")
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "the local API does not answer web pages (Sec-Fetch-Site: "+site+")", "")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "the local API does not answer web pages (Origin "+quote(o)+")", "")
			return
		}
		if hasBody(r) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidRequest,
					"Content-Type "+quote(r.Header.Get("Content-Type"))+" is not accepted: send the body as application/json", "")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r carries (or, for the body methods, may carry) a
// body.
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// hostAllowed accepts loopback names and addresses, the IP the connection
// was accepted on (when the API listens beyond loopback, clients call it by
// that IP), and the extra names.
func hostAllowed(r *http.Request, extra map[string]bool) bool {
	h := normalizeHost(r.Host)
	if h == "" {
		return false
	}
	if h == "localhost" || extra[h] {
		return true
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := la.(*net.TCPAddr); ok && ta.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// normalizeHost returns the lower-case host of a Host header value without
// port, brackets and trailing dot.
func normalizeHost(hostport string) string {
	h := strings.ToLower(strings.TrimSpace(hostport))
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(h, ".")
}

// sameOrigin reports whether origin is http(s)://<host> of the request.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// quote quotes a header value for an error message, cut at 100 bytes.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.Quote(s)
}
