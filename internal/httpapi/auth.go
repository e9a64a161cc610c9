package httpapi

import (
	"net/http"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// Roles of the bearer token (claim "role", a string, or "roles", a list).
const (
	RoleReadOnly  = "read-only"
	RoleWriteOnly = "write-only"
	RoleReadWrite = "read-write"
	RoleAdmin     = "admin"
)

// allowed is which roles each access level admits (sets, not a ladder).
var allowed = map[access][]string{
	readSet:  {RoleReadOnly, RoleReadWrite, RoleAdmin},
	writeSet: {RoleWriteOnly, RoleReadWrite, RoleAdmin},
	rwSet:    {RoleReadWrite, RoleAdmin},
	adminSet: {RoleAdmin},
}

// Claims is the token's payload this broker reads.
type Claims struct {
	Role   string   `json:"role,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
	jwt.RegisteredClaims
}

var (
	errAuthRequired = &apiError{status: http.StatusUnauthorized, msg: "Authentication required"}
	errForbidden    = &apiError{status: http.StatusForbidden, msg: "Insufficient permissions"}
)

// authorize checks the request's token against the route's role set (auth
// on) and returns the tenant the token names.
func (s *Server) authorize(r *http.Request, need access) (string, error) {
	if len(s.cfg.AuthSecret) == 0 || need == public {
		return "", nil
	}
	tok := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(tok) > 7 && strings.EqualFold(tok[:7], "bearer ") {
		tok = strings.TrimSpace(tok[7:])
	}
	if tok == "" {
		return "", errAuthRequired
	}
	var c Claims
	// exp / nbf are checked when present; a token without exp is
	// accepted (long-lived service tokens).
	if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return s.cfg.AuthSecret, nil },
		jwt.WithValidMethods([]string{"HS256", "HS384", "HS512"})); err != nil {
		return "", errAuthRequired
	}
	if strings.Contains(c.Tenant, tenantSep) || strings.ContainsRune(c.Tenant, queuekey.SepRune) {
		return "", errAuthRequired
	}
	roles := c.Roles
	if c.Role != "" {
		roles = append(roles, c.Role)
	}
	for _, have := range roles {
		for _, ok := range allowed[need] {
			if have == ok {
				return c.Tenant, nil
			}
		}
	}
	return "", errForbidden
}
