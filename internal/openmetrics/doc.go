// Package openmetrics writes a twin run's operational series
// (twin.Metrics, named by internal/signals) as an OpenMetrics text file
// with a timestamp on every sample, for Prometheus to backfill with
// `promtool tsdb create-blocks-from openmetrics`: the offline route for
// simulated time, which runs far faster than a scrape could follow
// (docs/metrics.md, "The twin").
//
// Simulated time t becomes the timestamp start + t, start being a fixed
// instant the caller chooses, so the same run gives the same file byte for
// byte. Histograms are classic (explicit buckets): native histograms have
// no OpenMetrics text form and cannot be backfilled.
//
// It reads a finished twin.Metrics and imports nothing from the twin's
// model; start reading at Write.
package openmetrics
