package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// User is the answer of GET /api/v0/console/user.
type User struct {
	Login     string `json:"login"`
	Name      string `json:"name,omitempty"`
	Email     string `json:"email,omitempty"`
	LogoutURL string `json:"logoutURL,omitempty"`
}

// Bounds of what a header may carry.
const (
	maxLogin    = 128
	maxUserText = 256
)

var errNoUser = errors.New("no user")

// checkLogin accepts printable UTF-8 of 1 to maxLogin bytes: the login keys the saved views
// and is written in the views file and logs.
func checkLogin(login string) error {
	if login == "" || len(login) > maxLogin {
		return fmt.Errorf("a login has 1 to %d bytes", maxLogin)
	}
	if !printable(login) {
		return fmt.Errorf("a login is printable UTF-8: %q", login)
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// userOf returns the user of a request: from the proxy's headers, or the default user. It
// fails when there is neither (errNoUser) or when the login header is not a valid login.
func (c *Console) userOf(r *http.Request) (User, error) {
	h := c.cfg.Auth.Headers
	login := ""
	if h.Login != "" {
		login = strings.TrimSpace(r.Header.Get(h.Login))
	}
	if login == "" {
		if c.cfg.Auth.DefaultUser.Login == "" {
			return User{}, errNoUser
		}
		return User{Login: c.cfg.Auth.DefaultUser.Login, Name: c.cfg.Auth.DefaultUser.Name}, nil
	}
	if err := checkLogin(login); err != nil {
		return User{}, fmt.Errorf("header %s: %w", h.Login, err)
	}
	u := User{Login: login}
	if h.Name != "" {
		u.Name = userText(r.Header.Get(h.Name))
	}
	if h.Email != "" {
		u.Email = userText(r.Header.Get(h.Email))
	}
	if h.LogoutURL != "" {
		u.LogoutURL = logoutURL(r.Header.Get(h.LogoutURL))
	}
	return u, nil
}

// userText keeps a display header when it is printable and short, and drops it otherwise.
func userText(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxUserText || !printable(s) {
		return ""
	}
	return s
}

// logoutURL keeps an http(s) URL or an absolute path: the console puts it in a link, where
// a javascript: URL would run.
func logoutURL(s string) string {
	s = userText(s)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
		return s
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/") && !strings.HasPrefix(s, "//"):
		return s
	}
	return ""
}
