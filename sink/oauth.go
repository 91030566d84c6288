package sink

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OAuth is an OAuth 2 token endpoint that grants tokens to the client's
// credentials (the client credentials grant), asked as Kafka's
// OAuthBearerLoginCallbackHandler asks it: HTTP basic authentication with
// the URL-encoded client id and secret, grant_type and scope in the form.
type OAuth struct {
	TokenURL, ClientID, ClientSecret, Scope string
	// Extensions are SASL extensions sent with each token (Confluent
	// Cloud's logicalCluster and identityPoolId).
	Extensions map[string]string
	// TLS configures an https endpoint; nil: the system's roots.
	TLS *tls.Config
}

// refreshAt is the part of a token's lifetime after which a new one is
// asked for (Kafka's sasl.login.refresh.window.factor), unless that leaves
// less than refreshBuffer (Kafka's sasl.login.refresh.buffer.seconds), or
// half the lifetime when that is shorter: franz-go authenticates again a
// second or more before the session the token gives ends, so a token
// handed out with less left is refused soon after.
const (
	refreshAt     = 0.8
	refreshBuffer = 5 * time.Minute
)

// refreshAfter is when a token of lifetime is replaced.
func refreshAfter(lifetime time.Duration) time.Duration {
	return min(time.Duration(float64(lifetime)*refreshAt), lifetime-min(refreshBuffer, lifetime/2))
}

// tokenTimeout bounds one request to the token endpoint.
const tokenTimeout = 10 * time.Second

// TokenError is a token endpoint's refusal or absence. It names the
// endpoint and never the secret.
type TokenError struct {
	URL string
	// Status is the HTTP status of a refusal; 0 when the endpoint could
	// not be reached or answered nonsense.
	Status int
	Err    error
}

func (e *TokenError) Error() string {
	switch {
	case e.Permanent():
		return fmt.Sprintf("OAuth token endpoint %s refused the client credentials (HTTP %d): %v (check --kafka-oauth-client-id, --kafka-oauth-client-secret and --kafka-oauth-scope)", e.URL, e.Status, e.Err)
	case e.Status != 0:
		return fmt.Sprintf("OAuth token endpoint %s failed (HTTP %d): %v", e.URL, e.Status, e.Err)
	}
	return fmt.Sprintf("OAuth token endpoint %s unreachable: %v", e.URL, e.Err)
}

func (e *TokenError) Unwrap() error { return e.Err }

// Permanent: a refusal of the credentials (400, 401, 403) does not go away
// by asking again; an endpoint that does not answer may come back.
func (e *TokenError) Permanent() bool {
	return e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// tokens hands out a token from the endpoint, asking for a new one once
// refreshAt of the current one's lifetime has passed. While the endpoint
// fails, a token that has not expired is handed out still.
type tokens struct {
	cfg    OAuth
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	token     string
	refresh   time.Time // when to ask for the next one
	expires   time.Time
	requested int // tokens asked for, for tests
}

func newTokens(cfg OAuth) *tokens {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.TLS
	return &tokens{cfg: cfg, client: &http.Client{Transport: tr, Timeout: tokenTimeout}, now: time.Now}
}

// get returns a token that has not reached its refresh time, asking the
// endpoint when needed.
func (t *tokens) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Before(t.refresh) {
		return t.token, nil
	}
	token, lifetime, err := t.fetch(ctx)
	if err != nil {
		if t.token != "" && now.Before(t.expires) {
			return t.token, nil
		}
		return "", err
	}
	t.token, t.expires = token, now.Add(lifetime)
	t.refresh = now.Add(refreshAfter(lifetime))
	return token, nil
}

// fetch asks the endpoint for a token, and says how long it lives: the
// JWT's exp claim, else the answer's expires_in; 0 when neither says.
func (t *tokens) fetch(ctx context.Context) (string, time.Duration, error) {
	t.requested++
	fail := func(status int, err error) (string, time.Duration, error) {
		return "", 0, &TokenError{URL: redactURL(t.cfg.TokenURL), Status: status, Err: err}
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if t.cfg.Scope != "" {
		form.Set("scope", t.cfg.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, errors.New("not a URL"))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if t.cfg.ClientID != "" {
		creds := url.QueryEscape(t.cfg.ClientID) + ":" + url.QueryEscape(t.cfg.ClientSecret)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(creds)))
	}
	resp, err := t.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is named once, by TokenError
		}
		return fail(0, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fail(0, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode, fmt.Errorf("%s", oauthError(body)))
	}
	var answer struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.AccessToken == "" {
		return fail(0, errors.New("the answer holds no access_token"))
	}
	lifetime := time.Duration(answer.ExpiresIn) * time.Second
	if exp, ok := jwtExpiry(answer.AccessToken); ok {
		lifetime = exp.Sub(t.now())
	}
	if lifetime <= 0 {
		return fail(0, errors.New("the token it granted has expired"))
	}
	return answer.AccessToken, lifetime, nil
}

// oauthError is what an endpoint's refusal says (RFC 6749 5.2: error,
// error_description), never its whole body.
func oauthError(body []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return "no OAuth error in the answer"
	}
	if e.Description != "" {
		return e.Error + ": " + e.Description
	}
	return e.Error
}

// jwtExpiry reads a JWT's exp claim without checking the signature: the
// broker checks it; the client only needs to know when to ask again.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	sec := int64(*claims.Exp)
	return time.Unix(sec, int64((*claims.Exp-float64(sec))*1e9)), true
}

// redactURL is u without a password or query, which may hold secrets.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(invalid URL)"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}
