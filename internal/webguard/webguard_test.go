package webguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:80": true, "127.0.0.1": true, "localhost:8080": true, "LOCALHOST": true, "[::1]:9": true, "::1": true, "127.9.9.9:1": true,
		"evil.example": false, "evil.example:80": false, "192.168.1.2:80": false, "0.0.0.0:80": false, "localhost.evil.example": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestAuthenticateExchange(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(RoleOf(r.Context()))) })
	h := Authenticate(Auth{Name: "t", Cookie: func() string { return "c" }, Params: []string{"token"},
		Role: func(tok string) string {
			if Equal(tok, "secret") {
				return "r"
			}
			return ""
		}, Wrong: "wrong", Missing: "missing"}, ok)
	do := func(method, target, cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "c", Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := do("GET", "/x?token=secret&a=1", ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/x?a=1" {
		t.Errorf("exchange: %d %q", w.Code, w.Header().Get("Location"))
	}
	if w := do("POST", "/x?token=secret", ""); w.Code != http.StatusUnauthorized {
		t.Errorf("a token in a POST's address: %d", w.Code)
	}
	if w := do("GET", "/x", "secret"); w.Code != http.StatusOK || w.Body.String() != "r" {
		t.Errorf("with the cookie: %d %q", w.Code, w.Body)
	}
	if w := do("GET", "/x", "other"); w.Code != http.StatusUnauthorized || w.Body.String() != "t: missing\n" {
		t.Errorf("a wrong cookie: %d %q", w.Code, w.Body)
	}
	if Equal("", "") {
		t.Error("empty tokens are equal")
	}
}
