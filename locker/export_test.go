package locker

// Test hooks: what the tests of package locker_test may see inside.

// UnlockScriptSHA is the SHA1 that token leases run unlock.lua by.
var UnlockScriptSHA = unlockScript.Hash()

// Keys returns how many keys l keeps state for.
func (l *Local) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// Waiters returns how many Lock calls wait for key.
func (l *Local) Waiters(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k, ok := l.keys[key]; ok {
		return k.waiters.Len()
	}
	return 0
}

// Pipelined returns how many pipelines r's nodes were sent and how many
// commands they held, over all nodes.
func (r *Redlock) Pipelined() (pipelines, commands int64) {
	for _, n := range r.pipes {
		pipelines += n.pipelines.Load()
		commands += n.commands.Load()
	}
	return pipelines, commands
}

// NotifyValue wakes key's waiters as a release of value announced on a
// node does.
func (r *Releases) NotifyValue(key, value string) { r.notify(key, value) }

// HandingOver says whether r remembers key as given back after a
// contended hold: its next Lock of key yields first.
func (r *Redlock) HandingOver(key string) bool {
	r.handover.mu.Lock()
	defer r.handover.mu.Unlock()
	_, ok := r.handover.keys[key]
	return ok
}
