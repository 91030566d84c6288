package kafkatest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Issuer is an OAuth 2 authorization server for the broker's OAUTHBEARER
// listener (Options.OAuth), since no Keycloak runs here: a token endpoint
// that grants RS256-signed JWTs to one client's credentials (the client
// credentials grant, credentials sent as RFC 6749 2.3.1 says), and the
// JWKS endpoint Kafka's OAuthBearerValidatorCallbackHandler checks their
// signatures against.
type Issuer struct {
	// ClientID and ClientSecret are the one client's credentials; the
	// token's subject, and so the Kafka principal, is the client id.
	ClientID, ClientSecret string
	srv                    *http.Server
	ln                     net.Listener
	key                    *rsa.PrivateKey

	mu       sync.Mutex
	lifetime time.Duration
	grants   int
	down     bool
}

// The issuer's client.
const (
	OAuthClient = "pgoutbox-relay"
	OAuthSecret = "Relay-Client-Secret-5"
	// OAuthAudience is the tokens' audience, which the broker expects.
	OAuthAudience = "pgoutbox-test-cluster"
)

// NewIssuer starts an issuer of tokens valid for lifetime, stopped when
// the test ends.
func NewIssuer(t testing.TB, lifetime time.Duration) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{ClientID: OAuthClient, ClientSecret: OAuthSecret, ln: ln, key: key, lifetime: lifetime}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", is.token)
	mux.HandleFunc("/jwks", is.jwks)
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go is.srv.Serve(ln)
	t.Cleanup(func() { is.srv.Close() })
	return is
}

// TokenURL is the token endpoint.
func (is *Issuer) TokenURL() string { return "http://" + is.ln.Addr().String() + "/token" }

// JWKSURL is the endpoint of the keys that sign the tokens.
func (is *Issuer) JWKSURL() string { return "http://" + is.ln.Addr().String() + "/jwks" }

// Grants counts the tokens granted.
func (is *Issuer) Grants() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.grants
}

// SetDown makes the token endpoint answer 503 (down) or grant again.
func (is *Issuer) SetDown(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.down {
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	id, secret, ok := r.BasicAuth()
	if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	if !ok || id != is.ClientID || secret != is.ClientSecret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client","error_description":"unknown client or wrong secret"}`)
		return
	}
	now := time.Now()
	claims := map[string]any{"sub": id, "iat": now.Unix(), "exp": now.Add(is.lifetime).Unix(), "iss": "pgoutbox-test-issuer", "aud": OAuthAudience}
	if s := r.FormValue("scope"); s != "" {
		claims["scope"] = s
	}
	jwt, err := is.sign(claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	is.grants++
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": jwt, "token_type": "Bearer", "expires_in": int(is.lifetime / time.Second)})
}

// sign makes an RS256 JWT of claims.
func (is *Issuer) sign(claims map[string]any) (string, error) {
	head, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "pgoutbox-test"})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(head) + "." + enc.EncodeToString(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	enc := base64.RawURLEncoding
	pub := is.key.PublicKey
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "pgoutbox-test", "use": "sig", "alg": "RS256",
		"n": enc.EncodeToString(pub.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}
