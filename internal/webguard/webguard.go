// Package webguard is the one set of defences of agentbox's local web
// pages (the live page, the dashboard): a loopback-only listener, a random
// token printed once in the address and exchanged on first load for an
// HttpOnly, SameSite=Strict cookie, the Host header checked against DNS
// rebinding, Origin and Sec-Fetch-Site against cross-site requests (no
// CORS is ever answered), and the headers every answer carries.
package webguard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Token is a fresh random token (256 bits, hex).
func Token() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("webguard: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// SourceHash is a CSP source for an inline script or style exactly as
// written into the page.
func SourceHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}

// Listen listens on addr (host:port; port 0 picks one), which must be a
// loopback address: the pages carry a token and what they show would
// travel in the clear. what names the page in the error ("live",
// "dashboard").
func Listen(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%s: %s is not a loopback address: the %s page listens on loopback only (to watch from elsewhere, tunnel it: ssh -L PORT:127.0.0.1:PORT)", what, addr, what)
	}
	return ln, nil
}

// Headers sets on every answer the policy csp, no sniffing, no framing,
// no referrer, nothing cached.
func Headers(csp string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// CheckHost refuses (421) a Host that is not a loopback address or
// localhost: a page of another site whose name was rebound to 127.0.0.1
// sends its own name (DNS rebinding). name prefixes the error
// ("agentbox live").
func CheckHost(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host) {
			http.Error(w, name+": the Host header names a host this page does not answer to (only 127.0.0.1, [::1] and localhost)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// LoopbackHost reports whether a Host header names a loopback address or
// localhost.
func LoopbackHost(host string) bool {
	h := host
	if name, _, err := net.SplitHostPort(host); err == nil {
		h = name
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// CheckOrigin refuses (403) a request from another origin (a browser
// sends Origin with WebSocket handshakes, form posts and cross-origin
// requests) or, by Sec-Fetch-Site, from another site: only the page's own
// scheme and host may talk to it.
func CheckOrigin(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Scheme != "http" || !strings.EqualFold(u.Host, r.Host) {
				http.Error(w, name+": requests from another origin are refused", http.StatusForbidden)
				return
			}
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			http.Error(w, name+": requests from another site are refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Auth lets in requests that carry a token's cookie.
type Auth struct {
	// Name prefixes the errors ("agentbox live").
	Name string
	// Cookie is the cookie's name (per port: cookies do not tell ports
	// apart); read on each request, so it may be set once the port is
	// known.
	Cookie func() string
	// Params are the query parameters a token may come in ("token").
	Params []string
	// Role is a token's role; "" for none. Compare with Equal.
	Role func(tok string) string
	// NoExchange refuses a token in the address of these requests (a
	// WebSocket's: it could not be redirected).
	NoExchange func(*http.Request) bool
	// Wrong is said to a token in the address that is not one of these
	// ("the token in the address is not this run's").
	Wrong string
	// Missing is said to a request without a valid cookie ("open the
	// address agentbox printed").
	Missing string
}

type roleKey struct{}

// RoleOf is the role Authenticate let a request in with.
func RoleOf(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}

// Equal compares a token in constant time; an empty one is never equal.
func Equal(tok, want string) bool {
	return tok != "" && want != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
}

// Authenticate lets in a request with a token's cookie. A first load
// with the token in the address (a GET) sets the cookie and sends the
// browser to the same page without the token, so it stays out of the
// address bar, the history and any Referer.
func Authenticate(a Auth, next http.Handler) http.Handler {
	refuse := func(w http.ResponseWriter, why string) {
		http.Error(w, a.Name+": "+why, http.StatusUnauthorized)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for _, p := range a.Params {
			if !q.Has(p) {
				continue
			}
			role := a.Role(q.Get(p))
			if role == "" || r.Method != http.MethodGet || (a.NoExchange != nil && a.NoExchange(r)) {
				refuse(w, a.Wrong)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: a.Cookie(), Value: q.Get(p), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del(p)
			to := r.URL.Path
			if len(q) > 0 {
				to += "?" + q.Encode()
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(a.Cookie())
		role := ""
		if err == nil {
			role = a.Role(c.Value)
		}
		if role == "" {
			refuse(w, a.Missing)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), roleKey{}, role)))
	})
}
