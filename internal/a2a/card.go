package a2a

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/errandhq/errand/internal/a2a/wire"
)

// CardPath is where A2A clients read an agent's card.
const CardPath = "/.well-known/agent-card.json"

// Which card a client gets: A2A v1.0 clients send "A2A-Version: 1.0" and
// get the v1.0 card; a request naming no version (as v0.3 clients send
// it; A2A reads no version as 0.3) or 0.x gets the v0.3 card, which also
// lists the v1.0 interfaces (supportedInterfaces), so a v1.0 client that
// sends no version finds them too. Both cards point at the one JSON-RPC
// endpoint, <base>/a2a: the method names say which version a request
// speaks.

// Cards serves the agent card at CardPath, open: clients read it before
// they authenticate. Mount it at GET /.well-known/.
func (s *Server) Cards() http.Handler { return http.HandlerFunc(s.serveCard) }

func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if r.URL.Path != CardPath {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no document here: the A2A agent card is at ` + CardPath + `"}}` + "\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	base, err := s.baseURL(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "bad_request", "message": err.Error()}})
		_, _ = w.Write(append(b, '\n'))
		return
	}
	var card any
	if legacyRequest(r) {
		card = s.v03Card(base)
	} else {
		card = s.v1Card(base)
	}
	b, err := json.MarshalIndent(card, "", "  ")
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.Set("Vary", "A2A-Version, Host, X-Forwarded-Proto")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(append(b, '\n'))
	}
}

// legacyRequest reports whether a card request names no version or a
// v0.x one.
func legacyRequest(r *http.Request) bool {
	v := requestedVersion(r)
	return v == "" || strings.HasPrefix(v, "0.")
}

// baseURL is where clients reach this errand: the configured BaseURL, or
// the request's own scheme and host.
func (s *Server) baseURL(r *http.Request) (string, error) {
	if s.cfg.BaseURL != "" {
		return strings.TrimSuffix(s.cfg.BaseURL, "/"), nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.TrimSpace(p) != "" {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "http", "https":
			scheme = p
		}
	}
	host := r.Host
	if host == "" || strings.ContainsAny(host, "/\\@?#% \t\r\n") {
		return "", errors.New("the request's Host header does not name a host the card could point at")
	}
	u, err := parseBaseURL(scheme + "://" + host)
	if err != nil {
		return "", errors.New("the request's Host header does not name a host the card could point at")
	}
	return u.String(), nil
}

// parseBaseURL checks a base URL: http(s), a host, no query or fragment.
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("the scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("a host is required")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("a base URL has no user, query or fragment")
	}
	return u, nil
}

// securityDescription tells a reader where the bearer token is.
const securityDescription = "the token errand serve keeps in $ERRAND_HOME/token (or in the variable auth.token_env names)"

var defaultModes = []string{"text/plain", "application/json"}

type v1Card struct {
	Name                 string                     `json:"name"`
	Description          string                     `json:"description"`
	SupportedInterfaces  []v1Interface              `json:"supportedInterfaces"`
	Version              string                     `json:"version"`
	Capabilities         v1Capabilities             `json:"capabilities"`
	SecuritySchemes      map[string]v1SecurityEntry `json:"securitySchemes"`
	SecurityRequirements []v1SecurityRequirement    `json:"securityRequirements"`
	DefaultInputModes    []string                   `json:"defaultInputModes"`
	DefaultOutputModes   []string                   `json:"defaultOutputModes"`
	Skills               []v1Skill                  `json:"skills"`
}

type v1Interface = wire.Interface

type v1Capabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
	ExtendedAgentCard bool `json:"extendedAgentCard"`
}

type v1SecurityEntry struct {
	HTTPAuth struct {
		Scheme      string `json:"scheme"`
		Description string `json:"description,omitempty"`
	} `json:"httpAuthSecurityScheme"`
}

type v1SecurityRequirement struct {
	Schemes map[string]struct {
		List []string `json:"list"`
	} `json:"schemes"`
}

type v1Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// bearerScheme names the card's one security scheme.
const bearerScheme = "bearer"

func (s *Server) interfaces(base string) []v1Interface {
	endpoint := base + "/a2a"
	return []v1Interface{
		{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: VersionV1},
		{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: VersionV03},
	}
}

func (s *Server) skills() []v1Skill {
	out := make([]v1Skill, 0, len(s.cfg.Skills))
	for _, sk := range s.cfg.Skills {
		tags := sk.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, v1Skill{ID: sk.ID, Name: sk.ID, Description: sk.Description, Tags: tags})
	}
	return out
}

func (s *Server) v1Card(base string) *v1Card {
	c := &v1Card{
		Name: s.cfg.Name, Description: s.cfg.Description, Version: s.cfg.Version,
		SupportedInterfaces: s.interfaces(base),
		Capabilities:        v1Capabilities{Streaming: true, PushNotifications: true},
		SecuritySchemes:     map[string]v1SecurityEntry{},
		DefaultInputModes:   defaultModes, DefaultOutputModes: defaultModes,
		Skills: s.skills(),
	}
	var bearer v1SecurityEntry
	bearer.HTTPAuth.Scheme, bearer.HTTPAuth.Description = "bearer", securityDescription
	c.SecuritySchemes[bearerScheme] = bearer
	req := v1SecurityRequirement{Schemes: map[string]struct {
		List []string `json:"list"`
	}{bearerScheme: {List: []string{}}}}
	c.SecurityRequirements = []v1SecurityRequirement{req}
	return c
}

type v03Card struct {
	ProtocolVersion      string                       `json:"protocolVersion"`
	Name                 string                       `json:"name"`
	Description          string                       `json:"description"`
	URL                  string                       `json:"url"`
	PreferredTransport   string                       `json:"preferredTransport"`
	AdditionalInterfaces []v03Interface               `json:"additionalInterfaces"`
	Version              string                       `json:"version"`
	Capabilities         v03Capabilities              `json:"capabilities"`
	SecuritySchemes      map[string]v03SecurityScheme `json:"securitySchemes"`
	Security             []map[string][]string        `json:"security"`
	DefaultInputModes    []string                     `json:"defaultInputModes"`
	DefaultOutputModes   []string                     `json:"defaultOutputModes"`
	Skills               []v1Skill                    `json:"skills"`
	// SupportedInterfaces lets a v1.0 client that asked for no version
	// find the v1.0 endpoint on this card.
	SupportedInterfaces []v1Interface `json:"supportedInterfaces"`
}

type v03Interface struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

type v03Capabilities struct {
	Streaming              bool `json:"streaming"`
	PushNotifications      bool `json:"pushNotifications"`
	StateTransitionHistory bool `json:"stateTransitionHistory"`
}

type v03SecurityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme"`
	Description string `json:"description,omitempty"`
}

func (s *Server) v03Card(base string) *v03Card {
	endpoint := base + "/a2a"
	return &v03Card{
		ProtocolVersion: "0.3.0",
		Name:            s.cfg.Name, Description: s.cfg.Description, Version: s.cfg.Version,
		URL: endpoint, PreferredTransport: "JSONRPC",
		AdditionalInterfaces: []v03Interface{{URL: endpoint, Transport: "JSONRPC"}},
		Capabilities:         v03Capabilities{Streaming: true, PushNotifications: true},
		SecuritySchemes:      map[string]v03SecurityScheme{bearerScheme: {Type: "http", Scheme: "bearer", Description: securityDescription}},
		Security:             []map[string][]string{{bearerScheme: {}}},
		DefaultInputModes:    defaultModes, DefaultOutputModes: defaultModes,
		Skills:              s.skills(),
		SupportedInterfaces: s.interfaces(base),
	}
}
