package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OAuth2 is Debezium Server's oauth2 authentication: each request carries
// a bearer token of the client credentials grant, asked for again once
// 0.9 of its expires_in has passed.
type OAuth2 struct {
	// TokenURL is the token endpoint (authentication.oauth2.token-url).
	TokenURL string
	// ClientID and ClientSecret are the client's credentials
	// (authentication.oauth2.client-id, client-secret).
	ClientID, ClientSecret string
	// Scope is asked for when not "" (authentication.oauth2.scope).
	Scope string
	// ClientAuth is how the credentials are sent: ClientSecretBasic,
	// Debezium Server's, by default.
	ClientAuth ClientAuth
}

// ClientAuth is how an OAuth2 client sends its credentials (RFC 6749
// 2.3.1).
type ClientAuth string

// The ways.
const (
	// ClientSecretBasic: HTTP basic authentication, as Debezium Server's
	// sink always sends them.
	ClientSecretBasic ClientAuth = "basic"
	// ClientSecretPost: client_id and client_secret in the form.
	ClientSecretPost ClientAuth = "post"
)

// JWT is Debezium Server's jwt authentication: a token from a JWT auth
// server's auth/authenticate, renewed at auth/refreshToken once 0.9 of its
// expires_in (milliseconds) has passed.
type JWT struct {
	// URL is the auth server's base; auth/authenticate and
	// auth/refreshToken are appended to it as written
	// (authentication.jwt.url).
	URL string
	// Username and Password are the user's (authentication.jwt.username,
	// password).
	Username, Password string
	// TokenExpiration and RefreshTokenExpiration are the lifetimes asked
	// for, whole minutes (token_expiration, refresh_token_expiration).
	TokenExpiration, RefreshTokenExpiration time.Duration
}

// Debezium Server's defaults and timeouts: its OAuth2 client's token
// request, its JWT client's requests (not timeout.ms).
const (
	DefaultJWTTokenExpiration        = 60 * time.Minute
	DefaultJWTRefreshTokenExpiration = 1440 * time.Minute
	oauth2Timeout                    = 30 * time.Second
	jwtTimeout                       = 60 * time.Second
)

// expiryFactor is the part of a token's lifetime after which Debezium
// Server asks for a new one.
const expiryFactor = 0.9

func (o *OAuth2) defaults() {
	if o.ClientAuth == "" {
		o.ClientAuth = ClientSecretBasic
	}
}

func (o OAuth2) validate() error {
	if !httpURL(o.TokenURL) {
		return errors.New("webhook: the OAuth2 token URL is not an http:// or https:// URL (authentication.oauth2.token-url)")
	}
	if o.ClientID == "" || o.ClientSecret == "" {
		return errors.New("webhook: OAuth2 needs the client id and secret (authentication.oauth2.client-id, client-secret)")
	}
	if o.ClientAuth != "" && o.ClientAuth != ClientSecretBasic && o.ClientAuth != ClientSecretPost {
		return fmt.Errorf("webhook: OAuth2 client authentication %q: basic or post", o.ClientAuth)
	}
	return nil
}

func (j *JWT) defaults() {
	if j.TokenExpiration == 0 {
		j.TokenExpiration = DefaultJWTTokenExpiration
	}
	if j.RefreshTokenExpiration == 0 {
		j.RefreshTokenExpiration = DefaultJWTRefreshTokenExpiration
	}
}

func (j JWT) validate() error {
	base, err := url.Parse(j.URL)
	full, ferr := url.Parse(j.URL + "auth/authenticate")
	switch {
	case err != nil || ferr != nil || !httpURL(j.URL):
		return errors.New("webhook: the JWT auth server's URL is not an http:// or https:// URL (authentication.jwt.url)")
	case full.Host != base.Host:
		// Appended as written, auth/authenticate would change the host.
		return errors.New("webhook: the JWT auth server's URL must end with / (auth/authenticate is appended to it; authentication.jwt.url)")
	case j.Username == "" || j.Password == "":
		return errors.New("webhook: JWT needs the username and password (authentication.jwt.username, password)")
	}
	for _, d := range []time.Duration{j.TokenExpiration, j.RefreshTokenExpiration} {
		if d < time.Minute || d%time.Minute != 0 {
			return errors.New("webhook: the JWT token expirations must be whole minutes, at least one (authentication.jwt.token_expiration, refresh_token_expiration)")
		}
	}
	return nil
}

// httpURL tells an http:// or https:// URL with a host.
func httpURL(s string) bool {
	p, err := url.Parse(s)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// authenticator gives each request its Authorization header.
type authenticator interface {
	// authorization is the header's value, asking for a token when none
	// is held or the one held has expired.
	authorization(ctx context.Context) (string, error)
	// rejected forgets the token the endpoint answered 401 to, so that
	// the request sent again carries a new one, as after Debezium
	// Server's restart.
	rejected()
}

// AuthError is an authentication server's failure: no token, so the
// event is not sent. Debezium Server's sink stops on it; pgoutbox sends
// the event again later, asking again. It names the server, never a
// secret or a token.
type AuthError struct {
	// Server is what failed: "the OAuth2 token endpoint", "the JWT auth
	// server".
	Server string
	// URL is the request's, without a password, query or fragment.
	URL string
	// Status is the HTTP status of an answer other than 2xx; 0 when the
	// server was not reached or its answer held no token.
	Status int
	// Detail is what went wrong, or the start of what it answered.
	Detail string
	// Hint says which settings to check after a refusal.
	Hint string
	Err  error
}

func (e *AuthError) Error() string {
	msg := "webhook: " + e.Server + " " + e.URL
	if e.Status != 0 {
		msg += fmt.Sprintf(" answered %d", e.Status)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func (e *AuthError) Unwrap() error { return e.Err }

// redactURL is u without a password, query or fragment, which may hold
// secrets.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(not a URL)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment = nil, "", false, ""
	return p.String()
}

// exchange sends req and reads a 2xx answer into answer; it returns the
// answer's status (0 when none came) and an *AuthError that shows none of
// secrets.
func exchange(client *http.Client, req *http.Request, answer any, fail func(status int, detail string, err error) *AuthError, secrets ...string) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named once, redacted
		}
		return 0, fail(0, "the request failed: "+scrub(err.Error(), secrets), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, fail(0, "reading its answer failed: "+scrub(err.Error(), secrets), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return resp.StatusCode, fail(resp.StatusCode, scrub(refusalText(body), secrets), nil)
	}
	if err := json.Unmarshal(body, answer); err != nil {
		return resp.StatusCode, fail(0, fmt.Sprintf("its answer (%d) is not the JSON of a token", resp.StatusCode), nil)
	}
	return resp.StatusCode, nil
}

// refusalText is what a refusal says: an OAuth2 error (RFC 6749 5.2) with
// its description, else the start of the body on one line.
func refusalText(body []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		if e.Description != "" {
			return e.Error + ": " + e.Description
		}
		return e.Error
	}
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// scrub replaces each secret in s.
func scrub(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "***")
		}
	}
	return s
}

// lifetime reads expires_in as Jackson reads a long: a number, or one
// in a string, its fraction dropped; absent, 0.
type lifetime int64

func (l *lifetime) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*l = 0
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*l = lifetime(f)
	return nil
}

// renewAt is when a token of n units of unit, granted at now, is replaced:
// 0.9 of it, in whole milliseconds, as Debezium Server counts.
func renewAt(now time.Time, n lifetime, unit time.Duration) time.Time {
	ms := int64(expiryFactor * float64(n) * float64(unit/time.Millisecond))
	return now.Add(time.Duration(ms) * time.Millisecond)
}

// oauth2Auth is the client credentials grant as Debezium Server's
// OAuth2Authenticator asks for it.
type oauth2Auth struct {
	cfg    OAuth2
	client *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time // when it is replaced
}

func (a *oauth2Auth) authorization(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || !time.Now().Before(a.expires) {
		if err := a.fetch(ctx); err != nil {
			return "", err
		}
	}
	return "Bearer " + a.token, nil
}

func (a *oauth2Auth) rejected() {
	a.mu.Lock()
	a.token = ""
	a.mu.Unlock()
}

// fetch asks for a token: the form as Debezium Server writes it (its
// values encoded as Java's URLEncoder encodes them), the credentials in
// the Authorization header or the form.
func (a *oauth2Auth) fetch(ctx context.Context) error {
	c := a.cfg
	form := "grant_type=client_credentials"
	if c.Scope != "" {
		form += "&scope=" + javaURLEncode(c.Scope)
	}
	if c.ClientAuth == ClientSecretPost {
		form += "&client_id=" + javaURLEncode(c.ClientID) + "&client_secret=" + javaURLEncode(c.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(form))
	if err != nil {
		return errors.New("webhook: building the OAuth2 token request failed (check authentication.oauth2.token-url)")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.ClientAuth == ClientSecretBasic {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.ClientID+":"+c.ClientSecret)))
	}
	fail := func(status int, detail string, err error) *AuthError {
		return &AuthError{Server: "the OAuth2 token endpoint", URL: redactURL(c.TokenURL), Status: status, Detail: detail, Err: err,
			Hint: "check the client id and secret and the scope: --http-oauth2-client-id, --http-oauth2-client-secret, --http-oauth2-scope"}
	}
	var answer struct {
		AccessToken string   `json:"access_token"`
		ExpiresIn   lifetime `json:"expires_in"`
	}
	if _, err := exchange(a.client, req, &answer, fail, c.ClientSecret); err != nil {
		return err
	}
	if answer.AccessToken == "" {
		return fail(0, "its answer holds no access_token", nil)
	}
	a.token, a.expires = answer.AccessToken, renewAt(time.Now(), answer.ExpiresIn, time.Second)
	return nil
}

// javaURLEncode encodes s as Java's URLEncoder does in UTF-8: letters,
// digits and .-*_ as they are, a space as +, every other byte %XX.
func javaURLEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(".-*_", c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jwtState is Debezium Server's JWTAuthenticator's.
type jwtState int

const (
	jwtNone   jwtState = iota // not authenticated
	jwtFailed                 // the auth server refused: authenticate again
	jwtActive
	jwtExpired // refresh
)

// jwtAuth is Debezium Server's JWTAuthenticator: auth/authenticate first
// and after a refusal, auth/refreshToken once the token expired.
type jwtAuth struct {
	cfg    JWT
	client *http.Client

	mu      sync.Mutex
	state   jwtState
	token   string
	refresh string
	expires time.Time
}

// The requests' JSON, as Jackson writes Debezium Server's classes (snake
// case, in their fields' order).
type (
	jwtInitial struct {
		Username           string `json:"username"`
		Password           string `json:"password"`
		TokenExpiry        int64  `json:"token_expiry_in_minutes"`
		RefreshTokenExpiry int64  `json:"refresh_token_expiry_in_minutes"`
	}
	jwtRefresh struct {
		RefreshToken       string `json:"jwt_refresh_token"`
		TokenExpiry        int64  `json:"token_expiry_in_minutes"`
		RefreshTokenExpiry int64  `json:"refresh_token_expiry_in_minutes"`
	}
)

func (a *jwtAuth) authorization(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == jwtActive && a.expires.Before(time.Now()) {
		a.state = jwtExpired
	}
	if a.state != jwtActive {
		if err := a.authenticate(ctx); err != nil {
			return "", err
		}
	}
	// "Bearer:", with the colon, is what Debezium Server sends.
	return "Bearer: " + a.token, nil
}

func (a *jwtAuth) rejected() {
	a.mu.Lock()
	a.state, a.token, a.refresh = jwtNone, "", ""
	a.mu.Unlock()
}

// authenticate asks for a token: a refresh when the token expired and a
// refresh token is held, else with the user's credentials. A refusal
// makes the next try authenticate with the credentials; a server not
// reached leaves the state as it was, as Debezium Server's does.
func (a *jwtAuth) authenticate(ctx context.Context) error {
	c := a.cfg
	minutes := func(d time.Duration) int64 { return int64(d / time.Minute) }
	path, body := "auth/authenticate", any(jwtInitial{Username: c.Username, Password: c.Password,
		TokenExpiry: minutes(c.TokenExpiration), RefreshTokenExpiry: minutes(c.RefreshTokenExpiration)})
	if a.state == jwtExpired && a.refresh != "" {
		path, body = "auth/refreshToken", jwtRefresh{RefreshToken: a.refresh,
			TokenExpiry: minutes(c.TokenExpiration), RefreshTokenExpiry: minutes(c.RefreshTokenExpiration)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as Jackson writes & < >
	if err := enc.Encode(body); err != nil {
		return fmt.Errorf("webhook: the JWT request: %w", err)
	}
	u := c.URL + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))))
	if err != nil {
		return errors.New("webhook: building the JWT request failed (check authentication.jwt.url)")
	}
	req.Header.Set("Content-Type", "application/json")
	fail := func(status int, detail string, err error) *AuthError {
		return &AuthError{Server: "the JWT auth server", URL: redactURL(u), Status: status, Detail: detail, Err: err,
			Hint: "check the username and password: --http-jwt-username, --http-jwt-password"}
	}
	var answer struct {
		ExpiresIn    lifetime `json:"expires_in"`
		JWT          string   `json:"jwt"`
		RefreshToken string   `json:"jwt_refresh_token"`
	}
	status, err := exchange(a.client, req, &answer, fail, c.Password, a.refresh)
	if status != 0 && (status < 200 || status >= 300) {
		a.state = jwtFailed
	}
	if err != nil {
		return err
	}
	if answer.JWT == "" {
		return fail(0, "its answer holds no jwt", nil)
	}
	a.state, a.token, a.refresh = jwtActive, answer.JWT, answer.RefreshToken
	a.expires = renewAt(time.Now(), answer.ExpiresIn, time.Millisecond)
	return nil
}
