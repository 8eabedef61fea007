package main

// The version of the build, for --version.

import (
	"runtime/debug"
	"strings"
)

// version describes the build of krabka-coord for --version: the module
// version (or "devel"), the VCS revision and time with a "dirty" mark for
// a modified tree, the Go version, and the franz-go version, as the Go
// toolchain recorded them in the binary.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information in the binary)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var revision, at string
	dirty := false
	for _, setting := range info.Settings {
		switch setting.Key {
		case "vcs.revision":
			revision = setting.Value
		case "vcs.time":
			at = setting.Value
		case "vcs.modified":
			dirty = setting.Value == "true"
		}
	}
	parts := []string{v}
	if revision != "" {
		if len(revision) > 12 {
			revision = revision[:12]
		}
		if dirty {
			revision += "-dirty"
		}
		parts = append(parts, "revision "+revision)
	}
	if at != "" {
		parts = append(parts, "committed "+at)
	}
	parts = append(parts, info.GoVersion)
	for _, dep := range info.Deps {
		if dep.Path == "github.com/twmb/franz-go" {
			parts = append(parts, "franz-go "+dep.Version)
		}
	}
	return strings.Join(parts, ", ")
}
