package sink

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// endpoint is a token endpoint of the client credentials grant: it checks
// the client's credentials as RFC 6749 2.3.1 sends them, and grants
// unsigned JWTs that expire after lifetime (exp), or only says
// expires_in when jwt is false.
type endpoint struct {
	mu       sync.Mutex
	lifetime time.Duration
	jwt      bool
	down     bool
	granted  int
	scope    string
	clock    func() time.Time
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	user, pass, ok := r.BasicAuth()
	if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	// The id and secret are form-encoded before basic authentication.
	if !ok || user != "relay%3Aone" || pass != "S3cret%2B%2F%3D" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client","error_description":"bad credentials"}`)
		return
	}
	e.scope = r.FormValue("scope")
	e.granted++
	token := fmt.Sprintf("opaque-%d", e.granted)
	if e.jwt {
		claims, _ := json.Marshal(map[string]any{"sub": "relay", "exp": float64(e.clock().Add(e.lifetime).UnixMilli()) / 1000})
		token = "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(claims) + ".sig" + fmt.Sprint(e.granted)
	}
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": int(e.lifetime / time.Second)})
}

// A token is asked for once 80% of its lifetime has passed, not before;
// while the endpoint is down, a token not yet expired is handed out, and
// after it expired the endpoint's absence is the error.
func TestTokenRefresh(t *testing.T) {
	for _, jwt := range []bool{true, false} {
		t.Run(fmt.Sprintf("jwt=%v", jwt), func(t *testing.T) {
			now := time.Now()
			clock := func() time.Time { return now }
			const lifetime = 2 * time.Hour
			ep := &endpoint{lifetime: lifetime, jwt: jwt, clock: clock}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			tk := newTokens(OAuth{TokenURL: srv.URL, ClientID: "relay:one", ClientSecret: "S3cret+/=", Scope: "kafka produce"})
			tk.now = clock
			ctx := context.Background()
			first, err := tk.get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ep.scope != "kafka produce" {
				t.Errorf("scope %q", ep.scope)
			}
			now = now.Add(lifetime * 79 / 100)
			if again, _ := tk.get(ctx); again != first || ep.granted != 1 {
				t.Errorf("asked again before 80%% of the lifetime: %d grants", ep.granted)
			}
			now = now.Add(lifetime * 2 / 100)
			second, err := tk.get(ctx)
			if err != nil || second == first || ep.granted != 2 {
				t.Errorf("not refreshed after 80%% of the lifetime: %v, %d grants", err, ep.granted)
			}
			ep.down = true
			now = now.Add(lifetime * 85 / 100) // past the refresh time, before expiry
			if got, err := tk.get(ctx); err != nil || got != second {
				t.Errorf("the endpoint down before the token expired: %q %v", got, err)
			}
			now = now.Add(lifetime * 20 / 100) // expired
			_, err = tk.get(ctx)
			var te *TokenError
			if !errors.As(err, &te) || te.Permanent() || !strings.Contains(err.Error(), "OAuth token endpoint "+srv.URL+" failed (HTTP 503)") {
				t.Errorf("the endpoint down after expiry: %v", err)
			}
		})
	}
}

// A token is replaced at 80% of its lifetime, but never with less than
// five minutes, or half its lifetime, left.
func TestRefreshAfter(t *testing.T) {
	for lifetime, want := range map[time.Duration]time.Duration{
		time.Hour: 48 * time.Minute, 10 * time.Minute: 5 * time.Minute, 6 * time.Second: 3 * time.Second,
	} {
		if got := refreshAfter(lifetime); got != want {
			t.Errorf("%v: %v, want %v", lifetime, got, want)
		}
	}
}

// Wrong client credentials are a permanent refusal that names the
// endpoint and says what the endpoint said; an endpoint that is not
// listening is unreachable. Neither shows the secret.
func TestTokenEndpointErrors(t *testing.T) {
	srv := httptest.NewServer(&endpoint{lifetime: time.Minute, clock: time.Now})
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/token"
	ln.Close()
	for _, tt := range []struct {
		name, url, secret string
		permanent         bool
		want              string
	}{
		{"wrong secret", srv.URL + "/token", "Wr0ng-secret", true, "refused the client credentials (HTTP 401): invalid_client: bad credentials"},
		{"nobody listening", closed, "S3cret+/=", false, "OAuth token endpoint " + closed + " unreachable"},
		{"a password in the URL", "http://user:UrlPa55@" + ln.Addr().String() + "/token?key=UrlPa55", "S3cret+/=", false, "unreachable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTokens(OAuth{TokenURL: tt.url, ClientID: "relay:one", ClientSecret: tt.secret}).get(context.Background())
			var te *TokenError
			if !errors.As(err, &te) || te.Permanent() != tt.permanent || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want a TokenError (permanent %v) saying %q", err, tt.permanent, tt.want)
			}
			for _, s := range []string{tt.secret, "UrlPa55"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}
