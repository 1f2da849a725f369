// Package anonymize turns a request log or trace into one that can leave
// the building: `fleetdrill trace anonymize IN OUT --key-file K`.
//
// It owns the allow-list, the keyed pseudonyms, the time and token
// coarsening, a reader for operators' own gateway logs (Generic: CSV and
// JSONL with a column Mapping), and the report of what was kept, hashed and
// dropped. The core (Anonymizer) works on trace.Record values; both kinds
// of input become Records behind Source: OpenGeneric for gateway logs,
// TraceSource for the formats internal/trace reads. Output goes to
// internal/trace's canonical Writer, which wants records sorted by time:
// Run holds records back up to Job.MaxDisorder to sort a log that is a
// little out of order (gateways often log a request when it finishes). It
// imports internal/trace and internal/suggest, and must not import the
// twin, the kernel or the CLI.
//
// # The allow-list
//
// The output has only these fields, built one by one (Anonymizer.Anonymize),
// so anything else is dropped by construction:
//
//   - kept: arrival time t, input and output token counts, model, class,
//     deadline_s, service_s (a measured execution time);
//   - hashed: tenant, user and session ids (keyed pseudonyms), and prefix
//     block hashes (keyed, so a hash of a guessed prompt cannot be matched);
//   - dropped: every other column — prompt and response text, metadata,
//     IPs, headers — and the source line number.
//
// # Pseudonyms
//
// An id becomes prefix || hex(HMAC-SHA256(key, field || 0x00 || id))[:n]
// with field "tenant", "user" or "session", prefix "t-", "u-" or "s-", and
// n = 16 hex characters (64 bits) by default. The same key gives the same
// pseudonym, so a session's requests stay linked, also across files
// anonymized separately; another key gives unrelated ones; one string in two
// fields gives unrelated ones. Without the key, a pseudonym cannot be
// reversed or recomputed from a guessed id (which a plain hash allows). See
// CollisionBound for the length: with 64 bits, a million ids in one field
// collide with probability about 2.7·10^-8. The key is raw bytes, at least
// MinKeyBytes; Key never prints them.
//
// # Time
//
// Wall-clock times (rfc3339, azure, unix, unix-ms) are made relative to the
// earliest request, found in a first pass; relative ones (seconds, ms,
// Mooncake, canonical) are kept unless Job.Rebase. Config.Resolution then
// floors them (exact times can be joined with other logs); Deadline and
// Service are kept as they are.
//
// # Nothing leaks
//
// No error, log line or report carries a cell's value: RowError names the
// line and column and says what was wrong; the report lists column names
// and counts. (A JSON syntax error names no character; trace readers' errors
// quote the cell, so TraceSource keeps only their line, column and what was
// wanted, and withholds their open errors, which quote the first line.) A
// CSV header's names are printed only once it has the required columns
// (before that, only names a couple of edits from a missing one), so a
// headerless file's first row is not printed as names; a JSONL log
// keyed by data rather than a schema has at most 200 dropped names listed.
// The canary tests check the output, the command's stdout and stderr, and
// the report for a prompt and for every raw id.
//
// # Where to start reading
//
// run.go (Job, Run), then anonymize.go (Config, Anonymizer), pseudonym.go
// and key.go, generic.go (Mapping, Generic, RowError) and timefmt.go,
// source.go (OpenGeneric, TraceSource, ChooseFormat) and report.go.
package anonymize
