package twin

// TimelineLen is the number of entries on the drill's timeline so far (all
// of them: a Snapshot's Events holds only the latest). The console's
// "next event" key steps the drill until it grows.
func (d *Drill) TimelineLen() int { return len(d.r.timeline) }
