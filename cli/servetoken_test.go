package cli

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestClaimTokenFile (issue 22, finding 5): servers started while one
// uses the token file (all at once here) share its token and never
// replace the file; once none holds it, the next one writes a new token.
// A file a live server uses that holds no valid token is an error, not
// replaced.
func TestClaimTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox", "serve.token")
	first, err := claimTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if first.shared || first.written != path || len(first.tokens) != 1 {
		t.Fatalf("the first claim: %+v", first)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var others []serveTokens
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := claimTokenFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			others = append(others, st)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, st := range others {
		if !st.shared || st.tokens[0] != first.tokens[0] {
			t.Errorf("a claim while the first holds the file: shared %v, same token %v", st.shared, st.tokens[0] == first.tokens[0])
		}
	}
	if data, _ := os.ReadFile(path); strings.TrimSpace(string(data)) != first.tokens[0] {
		t.Errorf("the file was replaced while a server used it")
	}
	first.release()
	for _, st := range others[1:] {
		st.release()
	}
	// One still holds it.
	if st, err := claimTokenFile(path); err != nil || st.tokens[0] != first.tokens[0] {
		t.Errorf("a claim while one server still holds the file: %v", err)
	} else {
		st.release()
	}
	others[0].release()
	next, err := claimTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.release()
	if next.shared || next.tokens[0] == first.tokens[0] {
		t.Errorf("with none holding the file, the next claim did not write a new token")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v %v", fi.Mode(), err)
	}
	// A live server's file with no token in it is refused, not replaced.
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := claimTokenFile(path); err == nil || !strings.Contains(err.Error(), "at least 16 characters") {
		t.Errorf("a live server's file without a valid token: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "short\n" {
		t.Errorf("the file was replaced: %q", data)
	}
}
