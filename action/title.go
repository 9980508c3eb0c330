package action

import (
	"fmt"
	"regexp"
	"strings"
)

// TitleMatcher compiles a window-title pattern: "/re/" is a regular
// expression, anything else a glob where * and ? are wildcards. An empty
// pattern matches every title.
func TitleMatcher(pattern string) (func(string) bool, error) {
	if pattern == "" {
		return func(string) bool { return true }, nil
	}
	if len(pattern) >= 2 && strings.HasPrefix(pattern, "/") && strings.HasSuffix(pattern, "/") {
		re, err := regexp.Compile(pattern[1 : len(pattern)-1])
		if err != nil {
			return nil, fmt.Errorf("bad regular expression %s: %w", pattern, err)
		}
		return re.MatchString, nil
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re := regexp.MustCompile(b.String())
	return re.MatchString, nil
}
