package twin

import "time"

// timelineLog is the run's timeline as it is written: its entries, and the
// keys of the entries made only the first time something happens. The
// runner embeds it, so that every part of the run that writes the timeline
// (the request engine's files among them) writes it the same way.
type timelineLog struct {
	timeline  []TimelineEvent
	firstSeen map[string]bool
}

// once reports whether key is new, and marks it seen.
func (l *timelineLog) once(key string) bool {
	if l.firstSeen[key] {
		return false
	}
	l.firstSeen[key] = true
	return true
}

// event adds an entry to the run's timeline.
func (l *timelineLog) event(at time.Duration, kind, detail string) {
	l.addEvent(timelineEvent(at, kind, detail))
}

// addEvent adds an entry made by one of timeline.go's constructors.
func (l *timelineLog) addEvent(ev TimelineEvent) {
	l.timeline = append(l.timeline, ev)
}

// noteRejectedRetry adds a timeline entry the first time clients retry a
// refusal for reason ("" when the retry follows a failed attempt).
func (l *timelineLog) noteRejectedRetry(reason string, at time.Duration) {
	if reason == "" {
		return
	}
	key := "retry:" + reason
	if l.once(key) {
		l.event(at, "first-client-retry", "clients retry requests refused for "+reason)
	}
}

// noteDeferral adds a timeline entry the first time requests are deferred
// for a reason.
func (l *timelineLog) noteDeferral(reason string, at time.Duration) {
	key := "deferred:" + reason
	if l.once(key) {
		l.event(at, "first-deferral", "first request deferred for "+reason)
	}
}

// note adds a timeline entry the first time a rejection reason occurs, and
// again for each new detail of it (why no pool could take a request).
func (l *timelineLog) note(reason, detail string, at time.Duration) {
	if key, ev := refusalNote(at, reason, detail); l.once(key) {
		l.addEvent(ev)
	}
}

// refusalNote is the key of a refusal for reason (and detail) among the
// refusals seen, and the timeline entry its first makes: a run and a
// replay's recorder note each key's first refusal alike.
func refusalNote(at time.Duration, reason, detail string) (string, TimelineEvent) {
	key, text := reason, "first request refused for "+reason
	if detail != "" {
		key += ": " + detail
		text += " (" + detail + ")"
	}
	return key, timelineEvent(at, "first-"+reason, text)
}
