package console

import (
	"net/textproto"
	"regexp"

	"flowzero/internal/config"
)

// Configuration is the web console: the pages, the saved views and who the user is.
//
//	console:
//	  enabled: true
//	  auth:
//	    headers: {login: Remote-User, name: Remote-Name, email: Remote-Email, logout-url: X-Logout-URL}
//	    default-user: {login: default, name: Default User}
//	  views-file: var/console-views.json
type Configuration struct {
	// Enabled serves the console and its API on the collector's HTTP listener
	// (collector.http.listen, loopback by default).
	Enabled bool `yaml:"enabled"`
	// Auth says who the user is. Behind an authenticating reverse proxy, the proxy sets
	// these headers; without them the default user applies. The headers are trusted as they
	// come: only let the proxy reach the listener.
	Auth AuthConfiguration `yaml:"auth"`
	// ViewsFile is the JSON file holding the saved views (written atomically: a new file
	// renamed over the old one). Its directory is created when missing. In the collector's
	// configuration, empty is console-views.json beside the embedded store's data directory
	// (outputs.store.embedded.path), var/console-views.json by default.
	ViewsFile string `yaml:"views-file"`
}

// AuthConfiguration names the reverse proxy's headers and the user without them.
type AuthConfiguration struct {
	// Headers are the request headers the reverse proxy sets after authenticating the user.
	Headers AuthHeaders `yaml:"headers"`
	// DefaultUser is the user of requests without the login header. With an empty login,
	// such requests are refused (401): the console is then only reachable through the proxy.
	DefaultUser DefaultUser `yaml:"default-user"`
}

// AuthHeaders are header names; an empty name is not read.
type AuthHeaders struct {
	// Login is the header holding the user's login, which owns their saved views.
	Login string `yaml:"login"`
	// Name is the header holding the user's display name.
	Name string `yaml:"name"`
	// Email is the header holding the user's email address.
	Email string `yaml:"email"`
	// LogoutURL is the header holding the URL that logs the user out of the proxy.
	LogoutURL string `yaml:"logout-url"`
}

// DefaultUser is the user of requests that carry no login header.
type DefaultUser struct {
	// Login of the default user; empty refuses requests without the login header.
	Login string `yaml:"login"`
	// Name of the default user, shown in the console.
	Name string `yaml:"name"`
}

// DefaultConfiguration returns the defaults: enabled, Akvorado's header names, a default
// user named "default", views in var/console-views.json beside the embedded store.
func DefaultConfiguration() Configuration {
	return Configuration{
		Enabled: true,
		Auth: AuthConfiguration{
			Headers: AuthHeaders{
				Login:     "Remote-User",
				Name:      "Remote-Name",
				Email:     "Remote-Email",
				LogoutURL: "X-Logout-URL",
			},
			DefaultUser: DefaultUser{Login: "default", Name: "Default User"},
		},
		ViewsFile: "var/console-views.json",
	}
}

// headerNameRe is an HTTP header name (RFC 9110 §5.1 token).
var headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Validate checks the configuration; errors name the key.
func (c Configuration) Validate() error {
	for key, h := range map[string]string{
		"auth.headers.login":      c.Auth.Headers.Login,
		"auth.headers.name":       c.Auth.Headers.Name,
		"auth.headers.email":      c.Auth.Headers.Email,
		"auth.headers.logout-url": c.Auth.Headers.LogoutURL,
	} {
		if h != "" && !headerNameRe.MatchString(h) {
			return config.Errorf(key, "%q is not an HTTP header name", h)
		}
	}
	if c.Auth.Headers.Login == "" && c.Auth.DefaultUser.Login == "" {
		return config.Errorf("auth.default-user.login", "needed when auth.headers.login is empty: nobody could use the console")
	}
	if c.Auth.DefaultUser.Login != "" {
		if err := checkLogin(c.Auth.DefaultUser.Login); err != nil {
			return config.Errorf("auth.default-user.login", "%v", err)
		}
	}
	if len(c.Auth.DefaultUser.Name) > maxUserText {
		return config.Errorf("auth.default-user.name", "longer than %d bytes", maxUserText)
	}
	if c.Enabled && c.ViewsFile == "" {
		return config.Errorf("views-file", "a file is needed to keep the saved views")
	}
	return nil
}

// canonical returns the canonical form of a header name ("" stays "").
func canonical(h string) string {
	if h == "" {
		return ""
	}
	return textproto.CanonicalMIMEHeaderKey(h)
}
