// Package client is the Go client of agentbox serve (API v1): the calls of
// the API, and Env, an environment in gymnasium's shape — Reset returns
// the first observation, Step performs an action and returns the next
// observation with the reward, whether the episode terminated or was
// truncated, and what else happened — over the server's WebSocket (one
// round trip a step) or plain HTTP.
//
//	c, err := client.New("http://127.0.0.1:8470", token)
//	env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
//	defer env.Close(context.WithoutCancel(ctx))
//	obs, info, err := env.Reset(ctx)
//	obs, reward, terminated, truncated, info, err := env.Step(ctx, action.Action{Kind: action.KeyDown, Key: "Right"})
//
// Errors of the API are *api.Error (errors.As), with the server's code.
package client

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/serve/api"
)

// Client talks to one server. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient uses h for every request (TLS settings, a proxy).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// DefaultURL is the server's address when none is given.
const DefaultURL = "http://127.0.0.1:8470"

// New makes a client of the server at baseURL (http or https) with its
// bearer token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http or https URL", baseURL)
	}
	if token == "" {
		return nil, errors.New("client: no token")
	}
	c := &Client{base: u, token: token, http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the server's address.
func (c *Client) BaseURL() string { return c.base.String() }

// FromEnv makes a client from the environment: AGENTBOX_URL (default
// DefaultURL), and AGENTBOX_TOKEN or else the token file agentbox serve
// writes (api.DefaultTokenFile).
func FromEnv(opts ...Option) (*Client, error) {
	base := os.Getenv("AGENTBOX_URL")
	if base == "" {
		base = DefaultURL
	}
	token := os.Getenv("AGENTBOX_TOKEN")
	if token == "" {
		data, err := os.ReadFile(api.DefaultTokenFile())
		if err != nil {
			return nil, fmt.Errorf("client: no AGENTBOX_TOKEN, and the token file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	return New(base, token, opts...)
}

// do sends a request and decodes a JSON answer into out (nil: discard).
// An error answer is an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, contentType string, body io.Reader, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("client: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return &eb.Error
		}
		return &api.Error{Code: api.CodeInternal, Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s: %.200s", method, path, resp.Status, data)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s: the answer is not what the API says: %w", method, path, err)
	}
	return nil
}

func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		body, ct = bytes.NewReader(data), "application/json"
	}
	return c.do(ctx, method, path, query, ct, body, out)
}

// Server says what the server offers.
func (c *Client) Server(ctx context.Context) (*api.Server, error) {
	var s api.Server
	return &s, c.doJSON(ctx, "GET", "/v1/server", nil, nil, &s)
}

// Environments lists this token's environments.
func (c *Client) Environments(ctx context.Context) ([]api.Environment, error) {
	var list []api.Environment
	return list, c.doJSON(ctx, "GET", "/v1/envs", nil, nil, &list)
}

// Create makes an environment and starts its first episode (the app up and
// ready); it returns once it has.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (*Env, error) {
	var d api.Environment
	if err := c.doJSON(ctx, "POST", "/v1/envs", nil, req, &d); err != nil {
		return nil, err
	}
	return newEnv(c, d, true), nil
}

// Attach is an environment that exists already (created by this token).
func (c *Client) Attach(ctx context.Context, id string) (*Env, error) {
	var d api.Environment
	if err := c.doJSON(ctx, "GET", "/v1/envs/"+url.PathEscape(id), nil, nil, &d); err != nil {
		return nil, err
	}
	return newEnv(c, d, d.Steps == 0 && d.State == api.StateRunning), nil
}

// Upload sends an app directory (agentbox.json at its root) as a tar; the
// server checks it as `agentbox run DIR` does. Create environments of it
// with CreateRequest.Upload.
func (c *Client) Upload(ctx context.Context, dir string) (*api.Upload, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, dir)) }()
	defer pr.Close()
	return c.UploadTar(ctx, pr)
}

// UploadTar sends an app directory already made into a tar.
func (c *Client) UploadTar(ctx context.Context, r io.Reader) (*api.Upload, error) {
	var u api.Upload
	return &u, c.do(ctx, "POST", "/v1/uploads", nil, "application/x-tar", r, &u)
}

// DeleteUpload removes an upload (one in use goes with its last
// environment).
func (c *Client) DeleteUpload(ctx context.Context, id string) error {
	return c.doJSON(ctx, "DELETE", "/v1/uploads/"+url.PathEscape(id), nil, nil, nil)
}

// writeTar writes dir's regular files, directories and symbolic links (not
// followed) as a tar.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid, h.ModTime = "", "", 0, 0, time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("client: tar %s: %w", dir, err)
	}
	return tw.Close()
}
