package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// authRequest is a request the auth server took.
type authRequest struct {
	method, path, contentType, authorization, body string
}

// authServer is the user's auth server: an OAuth2 token endpoint at
// /token and a JWT auth server under /auth/, granting tokens numbered in
// order that expire after expiresIn (seconds for OAuth2, milliseconds for
// JWT, as Debezium Server reads them), or answering status with body.
type authServer struct {
	*httptest.Server
	mu        sync.Mutex
	got       []authRequest
	expiresIn int
	status    int
	body      string
}

func newAuthServer(t *testing.T, expiresIn int) *authServer {
	a := &authServer{expiresIn: expiresIn}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.got = append(a.got, authRequest{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)})
		if a.status != 0 {
			w.WriteHeader(a.status)
			fmt.Fprint(w, a.body)
			return
		}
		n := len(a.got)
		if r.URL.Path == "/token" {
			fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, a.expiresIn)
			return
		}
		// "user" is a field of the server's own, which Debezium Server's
		// Jackson would fail on.
		fmt.Fprintf(w, `{"expires_in":%d,"jwt":"jwt-%d","jwt_refresh_token":"refresh-%d","refresh_token_expires_in":%d,"user":"relay"}`, a.expiresIn, n, n, 10*a.expiresIn)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *authServer) requests() []authRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]authRequest(nil), a.got...)
}

func (a *authServer) lifetime(n int) {
	a.mu.Lock()
	a.expiresIn = n
	a.mu.Unlock()
}

func (a *authServer) answer(status int, body string) {
	a.mu.Lock()
	a.status, a.body = status, body
	a.mu.Unlock()
}

// authorizations are the Authorization headers of the requests the
// endpoint took.
func authorizations(e *endpoint) []string {
	reqs, _ := e.received()
	var out []string
	for _, r := range reqs {
		out = append(out, r.Header.Get("Authorization"))
	}
	return out
}

// outcomesOf produces recs and returns each one's outcome: its promise's,
// or Produce's refusal (ErrHalted when a request failed before it was
// produced).
func outcomesOf(t *testing.T, p *Publisher, recs ...*kgo.Record) []error {
	t.Helper()
	out := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		if err := p.Produce(context.Background(), r, func(_ *kgo.Record, err error) { out[i] = err; wg.Done() }); err != nil {
			out[i] = err
			wg.Done()
		}
	}
	wg.Wait()
	return out
}

// The client credentials grant as Debezium Server asks for it: one token
// for many requests, the form in Java's encoding, the credentials as HTTP
// basic authentication (Debezium Server's only way) or in the form; each
// request carries "Bearer <token>".
func TestOAuth2Token(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("relay:one:s3cr&t+/="))
	for _, tc := range []struct {
		name       string
		auth       ClientAuth
		scope      string
		body, cred string
	}{
		{"basic", "", "", "grant_type=client_credentials", basic},
		{"basic-scope", ClientSecretBasic, "orders:write read~*", "grant_type=client_credentials&scope=orders%3Awrite+read%7E*", basic},
		{"post-scope", ClientSecretPost, "orders", "grant_type=client_credentials&scope=orders&client_id=relay%3Aone&client_secret=s3cr%26t%2B%2F%3D", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newAuthServer(t, 3600)
			e := newEndpoint(t, nil)
			p := newPublisher(t, Config{URL: e.URL, OAuth2: &OAuth2{TokenURL: as.URL + "/token", ClientID: "relay:one", ClientSecret: "s3cr&t+/=", Scope: tc.scope, ClientAuth: tc.auth}})
			for i, err := range produce(t, p, record("t", "1", `{"n":1}`), record("t", "2", `{"n":2}`), record("t", "3", `{"n":3}`)) {
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			want := authRequest{"POST", "/token", "application/x-www-form-urlencoded", tc.cred, tc.body}
			if got := as.requests(); len(got) != 1 || got[0] != want {
				t.Errorf("token requests %+v, want one: %+v", got, want)
			}
			if got := authorizations(e); strings.Join(got, "|") != "Bearer tok-1|Bearer tok-1|Bearer tok-1" {
				t.Errorf("Authorization headers %q, want the one token on each", got)
			}
		})
	}
}

// A token is asked for again once 0.9 of its expires_in has passed, and
// after the endpoint answered 401 to it.
func TestOAuth2Renewal(t *testing.T) {
	as := newAuthServer(t, 1)
	var mu sync.Mutex
	refuse := false
	e := newEndpoint(t, func(string) int {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return 401
		}
		return 200
	})
	setRefuse := func(b bool) {
		mu.Lock()
		refuse = b
		mu.Unlock()
	}
	p := newPublisher(t, Config{URL: e.URL, OAuth2: &OAuth2{TokenURL: as.URL + "/token", ClientID: "relay", ClientSecret: "s3cret"}})
	produce(t, p, record("t", "1", "1"), record("t", "2", "2"))
	as.lifetime(3600)
	time.Sleep(time.Second) // past 0.9 of tok-1's second
	produce(t, p, record("t", "3", "3"))
	if got := authorizations(e); strings.Join(got, "|") != "Bearer tok-1|Bearer tok-1|Bearer tok-2" {
		t.Errorf("Authorization headers %q, want tok-1 twice, then tok-2 after it expired", got)
	}

	setRefuse(true)
	errs := produce(t, p, record("t", "4", "4"))
	var se *StatusError
	if !errors.As(errs[0], &se) || se.Status != 401 || !strings.Contains(se.Error(), "a new one is asked for") {
		t.Fatalf("a 401 from the endpoint: %v", errs[0])
	}
	setRefuse(false)
	p.Resume()
	produce(t, p, record("t", "4", "4"))
	got := authorizations(e)
	if n := len(as.requests()); n != 3 || got[len(got)-1] != "Bearer tok-3" {
		t.Errorf("%d token requests, the last request with %q: want a new token (tok-3) after the 401", n, got[len(got)-1])
	}
}

// A token endpoint that refuses (401, 500), answers no token, or is down
// fails the record, and every one after it, and nothing is sent; the
// error names the endpoint's URL (without its query) and status, never
// the secret. Once it grants a token, the records go.
func TestOAuth2Failures(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"401", `{"error":"invalid_client","error_description":"no client relay with secret s3cret"}`, 401,
			"the OAuth2 token endpoint %s/token answered 401: invalid_client: no client relay with secret *** (check the client id and secret"},
		{"500", "s3cret\nbroke", 500, "the OAuth2 token endpoint %s/token answered 500: *** broke"},
		{"no-token", `{"token_type":"Bearer"}`, 200, "the OAuth2 token endpoint %s/token: its answer holds no access_token"},
		{"not-json", `<html>`, 200, "the OAuth2 token endpoint %s/token: its answer (200) is not the JSON of a token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newAuthServer(t, 3600)
			as.answer(tc.status, tc.body)
			e := newEndpoint(t, nil)
			p := newPublisher(t, Config{URL: e.URL, OAuth2: &OAuth2{TokenURL: as.URL + "/token?tenant=s3cret", ClientID: "relay", ClientSecret: "s3cret"}})
			errs := outcomesOf(t, p, record("t", "1", "1"), record("t", "2", "2"))
			var ae *AuthError
			if !errors.As(errs[0], &ae) || !strings.Contains(errs[0].Error(), fmt.Sprintf(tc.want, as.URL)) ||
				!errors.Is(errs[1], errAfterFailure) && !errors.Is(errs[1], ErrHalted) {
				t.Fatalf("outcomes %v, want %q", errs, fmt.Sprintf(tc.want, as.URL))
			}
			if strings.Contains(errs[0].Error(), "s3cret") {
				t.Errorf("the secret in %q", errs[0])
			}
			if reqs, _ := e.received(); len(reqs) != 0 {
				t.Errorf("%d requests sent without a token", len(reqs))
			}
			as.answer(0, "")
			p.Resume()
			if errs := produce(t, p, record("t", "1", "1"), record("t", "2", "2")); errs[0] != nil || errs[1] != nil {
				t.Errorf("after the endpoint granted a token: %v", errs)
			}
			if got := authorizations(e); len(got) != 2 || got[0] != "Bearer tok-2" {
				t.Errorf("Authorization headers %q, want tok-2 (the second answer) on both", got)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		e := newEndpoint(t, nil)
		p := newPublisher(t, Config{URL: e.URL, OAuth2: &OAuth2{TokenURL: "http://127.0.0.1:1/token", ClientID: "relay", ClientSecret: "s3cret"}})
		errs := produce(t, p, record("t", "1", "1"))
		var ae *AuthError
		if !errors.As(errs[0], &ae) || ae.Status != 0 || !strings.Contains(errs[0].Error(), "the OAuth2 token endpoint http://127.0.0.1:1/token: the request failed") || strings.Contains(errs[0].Error(), "s3cret") {
			t.Errorf("a token endpoint down: %v", errs[0])
		}
	})
}

// Debezium Server's JWT authentication: auth/authenticate with the user's
// credentials and the lifetimes in minutes, as Jackson writes its JSON;
// "Bearer: <jwt>" on each request; auth/refreshToken with the refresh
// token once 0.9 of expires_in (milliseconds) has passed; after a refused
// refresh, auth/authenticate again; the password never in an error. An
// answer without a jwt fails the event (Debezium Server would send
// "Bearer: null").
func TestJWT(t *testing.T) {
	as := newAuthServer(t, 1000)
	e := newEndpoint(t, nil)
	p := newPublisher(t, Config{URL: e.URL, JWT: &JWT{URL: as.URL + "/", Username: "relay", Password: "p&ss<w>rd",
		TokenExpiration: 5 * time.Minute, RefreshTokenExpiration: 30 * time.Minute}})
	produce(t, p, record("t", "1", "1"), record("t", "2", "2"))
	time.Sleep(time.Second) // past 0.9 of jwt-1's 1000 ms
	produce(t, p, record("t", "3", "3"))
	initial := authRequest{"POST", "/auth/authenticate", "application/json", "",
		`{"username":"relay","password":"p&ss<w>rd","token_expiry_in_minutes":5,"refresh_token_expiry_in_minutes":30}`}
	refresh := authRequest{"POST", "/auth/refreshToken", "application/json", "",
		`{"jwt_refresh_token":"refresh-1","token_expiry_in_minutes":5,"refresh_token_expiry_in_minutes":30}`}
	if got := as.requests(); len(got) != 2 || got[0] != initial || got[1] != refresh {
		t.Errorf("auth requests %+v, want\n%+v\n%+v", got, initial, refresh)
	}
	if got := authorizations(e); strings.Join(got, "|") != "Bearer: jwt-1|Bearer: jwt-1|Bearer: jwt-2" {
		t.Errorf("Authorization headers %q", got)
	}

	time.Sleep(time.Second)
	as.answer(401, `{"message":"refresh token expired for relay/p&ss<w>rd"}`)
	errs := produce(t, p, record("t", "4", "4"))
	var ae *AuthError
	if !errors.As(errs[0], &ae) || ae.Status != 401 || !strings.Contains(errs[0].Error(), "the JWT auth server "+as.URL+"/auth/refreshToken answered 401") ||
		strings.Contains(errs[0].Error(), "p&ss<w>rd") {
		t.Fatalf("a refused refresh: %v", errs[0])
	}
	as.answer(0, "")
	p.Resume()
	produce(t, p, record("t", "4", "4"))
	got := as.requests()
	if last := got[len(got)-1]; len(got) != 4 || last.path != "/auth/authenticate" {
		t.Errorf("after the refused refresh: %+v, want auth/authenticate again", got)
	}
	if h := authorizations(e); h[len(h)-1] != "Bearer: jwt-4" {
		t.Errorf("the last request's Authorization %q, want jwt-4", h[len(h)-1])
	}

	nojwt := newAuthServer(t, 1000)
	nojwt.answer(200, `{"expires_in":1000,"jwt_refresh_token":"r"}`)
	q := newPublisher(t, Config{URL: e.URL, JWT: &JWT{URL: nojwt.URL + "/", Username: "relay", Password: "p"}})
	if errs := outcomesOf(t, q, record("t", "5", "5")); errs[0] == nil || !strings.Contains(errs[0].Error(), "/auth/authenticate: its answer holds no jwt") {
		t.Errorf("an answer without a jwt: %v", errs[0])
	}
}

// Each authentication's settings are checked at start, without a URL or
// secret in the error; one authentication at most.
func TestAuthConfig(t *testing.T) {
	ok := OAuth2{TokenURL: "https://auth.example.com/token", ClientID: "relay", ClientSecret: "s3cret"}
	jwt := JWT{URL: "https://auth.example.com/", Username: "relay", Password: "s3cret"}
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef01234567"))
	with := func(f func(*Config)) Config {
		c := Config{URL: "https://hooks.example.com/"}
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"oauth2", with(func(c *Config) { c.OAuth2 = &ok }), ""},
		{"jwt", with(func(c *Config) { c.JWT = &jwt }), ""},
		{"oauth2-and-secret", with(func(c *Config) { c.OAuth2, c.WebhookSecret = &ok, secret }), "one authentication at most"},
		{"oauth2-and-jwt", with(func(c *Config) { c.OAuth2, c.JWT = &ok, &jwt }), "one authentication at most"},
		{"no-token-url", with(func(c *Config) { o := ok; o.TokenURL = "auth.example.com/token"; c.OAuth2 = &o }), "token URL is not an http"},
		{"no-secret", with(func(c *Config) { o := ok; o.ClientSecret = ""; c.OAuth2 = &o }), "needs the client id and secret"},
		{"client-auth", with(func(c *Config) { o := ok; o.ClientAuth = "jwt"; c.OAuth2 = &o }), `client authentication "jwt": basic or post`},
		{"jwt-host-only", with(func(c *Config) { j := jwt; j.URL = "https://auth.example.com"; c.JWT = &j }), "must end with /"},
		{"jwt-no-password", with(func(c *Config) { j := jwt; j.Password = ""; c.JWT = &j }), "needs the username and password"},
		{"jwt-seconds", with(func(c *Config) { j := jwt; j.TokenExpiration = 90 * time.Second; c.JWT = &j }), "whole minutes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, slog.New(slog.DiscardHandler))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "example.com")):
				t.Errorf("a secret or URL in %q", err)
			}
		})
	}
	if c := with(func(c *Config) { c.JWT = &jwt }); func() bool { c.Defaults(); return jwt.TokenExpiration != 0 }() {
		t.Error("Defaults changed the caller's JWT")
	}
}

// The token is asked for with the request's context: a relay that stops
// does not wait for an auth server that does not answer.
func TestAuthCancelled(t *testing.T) {
	hang := make(chan struct{})
	as := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer as.Close()
	defer close(hang)
	e := newEndpoint(t, nil)
	p := newPublisher(t, Config{URL: e.URL, OAuth2: &OAuth2{TokenURL: as.URL, ClientID: "relay", ClientSecret: "s3cret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.auth.authorization(ctx)
	if err == nil || time.Since(start) > 5*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v after %v, want the context's deadline", err, time.Since(start))
	}
}
