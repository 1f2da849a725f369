package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/sweep"
)

// newSweepCmd is `fleetdrill sweep`: a scenario over many points and seeds,
// sharded across machines (docs/sweeps.md).
func newSweepCmd() *cobra.Command {
	var (
		emit, image, claim, name, namespace string
		shards, parallelism                 int
	)
	cmd := &cobra.Command{
		Use:   "sweep SPEC --emit k8s [--image IMG] [--shards N] [--volume-claim NAME]",
		Short: "Run a sweep spec's points over its seeds, in shards, locally or as a Kubernetes Indexed Job",
		Long: "A sweep spec (docs/sweeps.md) names a scenario, base --set overrides, points (each a\n" +
			"name and overrides, or a grid expanded to its cartesian product) and seeds. Each\n" +
			"(point, seed) is one run. `sweep run` runs one shard of the runs and writes\n" +
			"shard-I-of-N.json; `sweep merge` merges a complete set of shard files into the\n" +
			"report. `sweep SPEC --emit k8s` prints a ConfigMap and an Indexed Job (a v1 List, JSON)\n" +
			"that runs N shards on a cluster, for kubectl apply -f.",
		Example: "  fleetdrill sweep run sweep.yaml --out results\n" +
			"  fleetdrill sweep run sweep.yaml --shard 1 --shards 4 --out results\n" +
			"  fleetdrill sweep merge results --json sweep.json\n" +
			"  fleetdrill sweep sweep.yaml --emit k8s --image registry/fleetdrill:v1 --shards 20 --volume-claim sweep-results > job.json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if emit != "k8s" {
				return &exitError{code: exitInvalid, err: fmt.Errorf("sweep: --emit %q: want k8s (or use sweep run / sweep merge)", emit)}
			}
			spec, err := sweep.Load(args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			b, err := sweep.K8sManifest(spec, sweep.K8sOptions{
				Name: name, Namespace: namespace, Image: image, Shards: shards,
				Parallelism: parallelism, VolumeClaim: claim,
			})
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&emit, "emit", "", "what to emit: k8s (a ConfigMap and an Indexed Job, as a JSON v1 List)")
	f.StringVar(&image, "image", defaultSweepImage(), "the container image; fleetdrill must be on its PATH")
	f.IntVar(&shards, "shards", 1, "shards, one per completion index")
	f.IntVar(&parallelism, "parallelism", 0, "pods at a time; 0 means one per shard")
	f.StringVar(&claim, "volume-claim", "fleetdrill-sweep-results", "the PersistentVolumeClaim the shard files are written to (ReadWriteMany for pods on several nodes)")
	f.StringVar(&name, "name", "", "the Job's name (the ConfigMap's is NAME-spec); default fleetdrill-sweep-<spec hash>")
	f.StringVar(&namespace, "namespace", "", "the namespace; default kubectl's")
	cmd.AddCommand(newSweepRunCmd(), newSweepMergeCmd())
	return cmd
}

// imageTag is what a container image tag may be.
var imageTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// defaultSweepImage is fleetdrill:<version>, or fleetdrill:latest for a
// version that is not a valid tag (a development build's "(devel)").
func defaultSweepImage() string {
	if v := buildVersion(); imageTag.MatchString(v) {
		return "fleetdrill:" + v
	}
	return "fleetdrill:latest"
}

func newSweepRunCmd() *cobra.Command {
	var (
		shard, shards, parallel int
		out                     string
	)
	cmd := &cobra.Command{
		Use:   "run SPEC [--shard I --shards N] [--out DIR]",
		Short: "Run one shard of a sweep (the runs whose index mod N is I) and write DIR/shard-I-of-N.json",
		Long: "run runs the runs of shard I of N, in parallel, and writes DIR/shard-I-of-N.json.\n" +
			"Without --shard every run is run (shard 0 of 1) and the report is printed too.\n" +
			"--shard defaults to $JOB_COMPLETION_INDEX when it is set (a Kubernetes Indexed Job).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			if !cmd.Flags().Changed("shard") {
				if v, ok := os.LookupEnv("JOB_COMPLETION_INDEX"); ok && v != "" {
					n, err := strconv.Atoi(v)
					if err != nil {
						return &exitError{code: exitInvalid, err: fmt.Errorf("sweep run: $JOB_COMPLETION_INDEX=%q: want a shard index", v)}
					}
					shard = n
				}
			}
			if shards < 1 || shard < 0 || shard >= shards {
				return &exitError{code: exitInvalid, err: fmt.Errorf("sweep run: --shard %d --shards %d: want 0 <= shard < shards", shard, shards)}
			}
			if parallel < 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("sweep run: --parallel %d: want >= 0", parallel)}
			}
			spec, err := sweep.Load(args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			runs := len(sweep.Indexes(shard, shards, spec.Runs()))
			fmt.Fprintf(stderr, "sweep: %s: %d points × %d seeds = %d runs; shard %d of %d: %d runs\n",
				args[0], len(spec.Points), len(spec.Seeds), spec.Runs(), shard, shards, runs)
			sh, err := sweep.RunShard(cmd.Context(), spec, sweep.Options{
				Shard: shard, Shards: shards, Parallel: parallel, Version: buildVersion(),
			})
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			path, err := sweep.WriteShard(out, sh)
			if err != nil {
				return fmt.Errorf("sweep run: --out %s: %w", out, err)
			}
			fmt.Fprintf(stderr, "sweep: %d runs in %.1fs on %d workers; wrote %s\n", runs, sh.Run.WallS, sh.Run.Parallel, path)
			if shards == 1 {
				rep, err := sweep.Merge([]*sweep.Shard{sh}, nil)
				if err != nil {
					return err
				}
				return sweep.WriteText(cmd.OutOrStdout(), rep)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&shard, "shard", 0, "this shard's index, 0..N-1 (default $JOB_COMPLETION_INDEX, else 0)")
	f.IntVar(&shards, "shards", 1, "how many shards the runs are split into")
	f.IntVar(&parallel, "parallel", 0, "runs at a time; 0 means one per CPU (GOMAXPROCS)")
	f.StringVar(&out, "out", ".", "the directory the shard file is written to")
	return cmd
}

func newSweepMergeCmd() *cobra.Command {
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "merge DIR [--json FILE]",
		Short: "Merge a complete set of shard files into the sweep's report",
		Long: "merge reads DIR/shard-*-of-N.json, checks that every index 0..N-1 is there once and\n" +
			"that all come from the same sweep (spec hash), and prints per point the mean and 95%\n" +
			"confidence interval over the seeds of each figure. --json writes the report (every\n" +
			"run's figures, then the aggregates) as JSON; - for stdout in place of the table.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := sweep.ReadDir(args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if jsonPath == "-" {
				return sweep.WriteJSON(cmd.OutOrStdout(), rep)
			}
			if err := sweep.WriteText(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if jsonPath == "" {
				return nil
			}
			return writeFileAtomic(jsonPath, func(f *os.File) error { return sweep.WriteJSON(f, rep) })
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "also write the report as JSON to this file (- for stdout, in place of the table)")
	return cmd
}

// writeFileAtomic writes path through a temporary file beside it.
func writeFileAtomic(path string, write func(*os.File) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("sweep merge: --json %s: %w", path, err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	err = errors.Join(write(f), f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("sweep merge: --json %s: %w", path, err)
	}
	return nil
}
