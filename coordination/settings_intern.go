package coordination

// The settings that many campaigns share: a process that holds thousands
// of roles passes the same options to each AcquireLeadership, and keeps one
// copy of what they build rather than one for each leadership (issue 19:
// 150 bytes of each held role).

import (
	"reflect"
	"runtime"
	"sync"
	"unique"
	"weak"
)

// maxSharedSettings bounds how many distinct settings the table shares at
// once. The table holds settings only while a leadership or a campaign
// still uses them (a weak pointer, keyed by the settings' unique.Handle;
// the entry goes with the last user), so it no longer grows for the life
// of the process; the bound keeps options that differ from call to call
// (a logger made for each role, say) from paying an entry and unique's
// copy beside their own: past it, settings are not shared, and cost what
// they did.
const maxSharedSettings = 64

var sharedSettings struct {
	mu      sync.Mutex
	byValue map[unique.Handle[settings]]weak.Pointer[settings]
}

// internSettings returns the shared copy of settings equal to s, s itself
// when it becomes that copy, and s unshared when it cannot be compared (a
// Clock of a type without ==, the token of withFencedToken, which is a
// pointer each call makes, and WithSuccessor's) or the table is full. Settings are never
// written after newSettings builds them, so a shared copy is safe for
// concurrent use.
func internSettings(s *settings) *settings {
	if s.fenced != nil || s.successor != nil || !reflect.ValueOf(s.clock).Comparable() {
		return s
	}
	key := unique.Make(*s)
	sharedSettings.mu.Lock()
	defer sharedSettings.mu.Unlock()
	if shared := sharedSettings.byValue[key].Value(); shared != nil {
		return shared
	}
	// An entry whose settings were collected and whose cleanup has not run
	// yet is replaced here; the cleanup then leaves the new one alone.
	if _, stale := sharedSettings.byValue[key]; !stale && len(sharedSettings.byValue) >= maxSharedSettings {
		return s
	}
	if sharedSettings.byValue == nil {
		sharedSettings.byValue = make(map[unique.Handle[settings]]weak.Pointer[settings])
	}
	pointer := weak.Make(s)
	sharedSettings.byValue[key] = pointer
	runtime.AddCleanup(s, forgetSettings, settingsEntry{key: key, pointer: pointer})
	return s
}

// settingsEntry names one entry of the table, for its cleanup.
type settingsEntry struct {
	key     unique.Handle[settings]
	pointer weak.Pointer[settings]
}

// forgetSettings removes the entry of settings that no campaign or
// leadership uses any more, unless another copy replaced it since.
func forgetSettings(entry settingsEntry) {
	sharedSettings.mu.Lock()
	defer sharedSettings.mu.Unlock()
	if sharedSettings.byValue[entry.key] == entry.pointer {
		delete(sharedSettings.byValue, entry.key)
	}
}
