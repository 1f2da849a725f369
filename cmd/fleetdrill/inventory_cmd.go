package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gpu"
)

// openGPUs opens the local GPUs; tests replace it with a mock server or a
// fake.
var openGPUs = gpu.Open

// addPoolFlags adds the flags that say what NVML cannot: the pool's place
// in a scenario. inventory and agent share them.
func addPoolFlags(cmd *cobra.Command, o *gpu.PoolOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "pool name (default PROVIDER-ACCELERATOR)")
	fl.StringVar(&o.Region, "region", "", "region of the scenario the pool is in")
	fl.StringVar(&o.Provider, "provider", gpu.DefaultProvider, "provider name")
	fl.StringVar(&o.Accelerator, "accelerator", "", "accelerator name (default: from the product name, e.g. h100-80gb-hbm3)")
	fl.StringVar(&o.Runtime, "runtime", "", "runtime of the scenario the pool runs")
	fl.StringSliceVar(&o.Models, "models", nil, "models of the scenario the pool serves")
	fl.IntVar(&o.GPUsPerReplica, "gpus-per-replica", 1, "GPUs per replica (tensor-parallel degree)")
	fl.IntVar(&o.MaxBatch, "max-batch", gpu.DefaultMaxBatch, "max_batch of the pool (vLLM max_num_seqs)")
	fl.Float64Var(&o.UsableFraction, "usable-fraction", gpu.DefaultUsableFraction, "usable_fraction of the accelerator (vLLM gpu_memory_utilization)")
}

// checkPoolFlags collects the problems of the pool flags, before NVML is
// opened: a zero the library would read as "the default" is an error here.
func checkPoolFlags(o gpu.PoolOptions) error {
	var errs []string
	if o.GPUsPerReplica < 1 {
		errs = append(errs, fmt.Sprintf("--gpus-per-replica: got %d, want >= 1", o.GPUsPerReplica))
	}
	if o.MaxBatch < 1 {
		errs = append(errs, fmt.Sprintf("--max-batch: got %d, want >= 1", o.MaxBatch))
	}
	if !(o.UsableFraction > 0 && o.UsableFraction <= 1) {
		errs = append(errs, fmt.Sprintf("--usable-fraction: got %g, want > 0 and <= 1", o.UsableFraction))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func newInventoryCmd() *cobra.Command {
	var (
		o      gpu.PoolOptions
		format string
	)
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Describe this machine's NVIDIA GPUs as a scenario accelerator and pool",
		Long: `Discover the local NVIDIA GPUs through NVML (name, memory, driver and CUDA
versions, compute capability, MIG mode, ECC and NVLink where the GPUs report
them) and print them as scenario YAML: an accelerator and a pool for each kind
of GPU, to paste under a scenario's accelerators: and pools:. NVML cannot know
the pool's region, runtime and models: give them with --region, --runtime and
--models (names of the scenario's own) and the pool loads as it is.

--format json prints the inventory itself with the same fragment, as the agent
serves it on /inventory.

Needs the NVIDIA driver (libnvidia-ml.so.1) and a build with cgo; the static
node image has neither. Exit status: 0, or 2 when NVML is unavailable or a
flag is invalid (one line on stderr).`,
		Example: `  fleetdrill inventory
  fleetdrill inventory --region us-east --runtime vllm-0.8.5 --models llama-3.1-8b
  fleetdrill inventory --gpus-per-replica 4 --accelerator h100-sxm --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := checkPoolFlags(o)
			if format != "yaml" && format != "json" {
				err = errors.Join(fmt.Errorf("--format %q: want yaml or json", format), err)
			}
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("inventory: %s", strings.ReplaceAll(err.Error(), "\n", "; "))}
			}
			src, err := openGPUs()
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("inventory: %w", err)}
			}
			defer src.Close()
			doc, err := gpu.NewDocument(src, o)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("inventory: %w", err)}
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			text, err := doc.Scenario.YAML()
			if err != nil {
				return fmt.Errorf("inventory: %w", err)
			}
			_, err = out.Write(text)
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "yaml", "output format: yaml (a scenario fragment) or json (the inventory and the fragment)")
	addPoolFlags(cmd, &o)
	return cmd
}
