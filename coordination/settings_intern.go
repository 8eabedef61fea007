package coordination

// The settings that many campaigns share: a process that holds thousands
// of roles passes the same options to each AcquireLeadership, and keeps one
// copy of what they build rather than one for each leadership (issue 19:
// 150 bytes of each held role).

import (
	"reflect"
	"sync"
)

// maxSharedSettings bounds how many distinct settings internSettings keeps
// for the life of the process. Settings past the bound are not shared:
// options that differ from call to call (a logger made for each role, say)
// cost what they did, and the table never grows past the bound.
const maxSharedSettings = 64

var sharedSettings struct {
	mu      sync.Mutex
	byValue map[settings]*settings
}

// internSettings returns the shared copy of settings equal to s, s itself
// when it becomes that copy, and s unshared when it cannot be compared (a
// Clock of a type without ==, the token of withFencedToken, which is a
// pointer each call makes) or the table is full. Settings are never
// written after newSettings builds them, so a shared copy is safe for
// concurrent use.
func internSettings(s *settings) *settings {
	if s.fenced != nil || !reflect.ValueOf(s.clock).Comparable() {
		return s
	}
	sharedSettings.mu.Lock()
	defer sharedSettings.mu.Unlock()
	if shared, ok := sharedSettings.byValue[*s]; ok {
		return shared
	}
	if len(sharedSettings.byValue) >= maxSharedSettings {
		return s
	}
	if sharedSettings.byValue == nil {
		sharedSettings.byValue = make(map[settings]*settings)
	}
	sharedSettings.byValue[*s] = s
	return s
}
