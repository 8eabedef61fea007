package coordination

// The renewer's pause and resume (leadership_renewal.go), opened to the
// scenario tests of package coordination_test (renewer_pause_test.go),
// which run over the in-memory cluster of coordinationtest.

// PauseRenewals calls the renewer's pause.
func PauseRenewals(l *Leadership) { l.renewer.pause() }

// ResumeRenewals calls the renewer's resume.
func ResumeRenewals(l *Leadership) { l.renewer.resume() }
