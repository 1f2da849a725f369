package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/scorecard"
)

func newScorecardCmd() *cobra.Command {
	var (
		provider string
		sets     []string
		jsonPath string
		mdPath   string
		live     bool
		trial    int
		acq      scorecard.AcquisitionOptions
	)
	cmd := &cobra.Command{
		Use:   "scorecard [SCENARIO] --provider P",
		Short: "Portability scorecard for a capacity source: the provider's pools through six stages and a production gate",
		Long: `Put the pools of provider P through the six-stage portability test, on twin
drills of the scenario: 1 workload inventory, 2 runtime parity (compatibility
registry), 3 latency variance (the provider's pools alone, cold start, the
saturation multiplier; --live also replays it on the live harness, Docker
containers, 1 replica per pool, speed 5), 4 data boundary (a regional outage of each region:
residency under failover), 5 fallback readiness (each fallback route
exercised), 6 acquisition reliability (a load step that makes the pools
scale up, over --acquisition-seeds seeds: replicas granted, time from ask to
serving, the shortfall's SLO cost). It ends in a production gate: runtime
parity, quality, latency budget, data boundary, observability, rollback and
acquisition (granted share, time to serving, SLO cost), each with its
evidence. A pool with no acquisition: block leaves acquisition untested,
which the gate shows and does not fail.
A provider offered only in the scenario's purchasable: list is scored on a
trial purchase of its types (--trial-replicas each). See docs/scorecard.md.

Exit status: 0 when the gate passes, 1 when an item fails, 2 for invalid
input (an unknown provider, a scenario that does not load).`,
		Example: `  fleetdrill scorecard default --provider gpu-cloud-b --set duration=5m
  fleetdrill scorecard default --provider gpu-cloud-a --json card.json --md card.md
  fleetdrill scorecard default --provider gpu-cloud-c --trial-replicas 2
  fleetdrill scorecard gameday-autoscale-stockout --provider gpu-cloud-b --acquisition-fault 'stockout provider=gpu-cloud-b at=0s grant=0.5'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "default"
			if len(args) == 1 {
				name = args[0]
			}
			if trial < 1 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --trial-replicas %d: want >= 1", trial)}
			}
			if acq.Seeds < 1 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --acquisition-seeds %d: want >= 1", acq.Seeds)}
			}
			if acq.Step < 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --acquisition-step %g: want > 0, or 0 for stage 3's first breaking multiplier", acq.Step)}
			}
			if acq.MinGrantedShare <= 0 || acq.MinGrantedShare > 1 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --acquisition-min-granted %g: want a share in (0, 1], e.g. 0.9", acq.MinGrantedShare)}
			}
			if acq.ServingSlack <= 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --acquisition-slack %v: want > 0, e.g. 1m", acq.ServingSlack)}
			}
			if acq.MaxSLODrop <= 0 || acq.MaxSLODrop > 1 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scorecard: --acquisition-max-slo-drop %g: want a share in (0, 1], e.g. 0.05 for five points", acq.MaxSLODrop)}
			}
			card, err := scorecard.Run(cmd.Context(), scorecard.Options{Scenario: name, Sets: sets, Provider: provider, Live: live, TrialReplicas: trial,
				Acquisition: acq})
			if err != nil {
				var ie *scorecard.InvalidError
				if errors.As(err, &ie) {
					return &exitError{code: exitInvalid, err: err}
				}
				return err
			}
			if jsonPath != "" {
				b, err := card.JSON()
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
			}
			if mdPath != "" {
				if err := os.WriteFile(mdPath, []byte(card.Markdown()), 0o644); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
			}
			if _, err := fmt.Fprint(cmd.OutOrStdout(), card.GateText()); err != nil {
				return err
			}
			if !card.Passed {
				return &exitError{code: exitFailed, err: fmt.Errorf("scorecard: the production gate fails for %s", provider)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "the provider whose pools are tested (a pool's `provider` field)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a scenario field: `path=value` (repeatable)")
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the scorecard as JSON to `FILE`")
	cmd.Flags().StringVar(&mdPath, "md", "", "write the scorecard as Markdown to `FILE`")
	cmd.Flags().IntVar(&trial, "trial-replicas", 1, "when the provider has no pool in the fleet, buy this many replicas of each of its purchasable types for the drills")
	cmd.Flags().IntVar(&acq.Seeds, "acquisition-seeds", scorecard.DefaultAcquisitionSeeds, "run the acquisition drill at this many seeds (the scenario's seed and the next ones)")
	cmd.Flags().Float64Var(&acq.Step, "acquisition-step", 0, "the acquisition drill's load step, an arrival-rate multiplier; 0: the first multiplier of the saturation search that breaks an SLO")
	cmd.Flags().StringArrayVar(&acq.Faults, "acquisition-fault", nil, "add an acquisition fault to the drill: `'stockout provider=P at=0s grant=0'`, quota-cap or slow-provisioning (repeatable)")
	cmd.Flags().Float64Var(&acq.MinGrantedShare, "acquisition-min-granted", scorecard.DefaultMinGrantedShare, "gate: the least share of the replicas asked that the provider must grant")
	cmd.Flags().DurationVar(&acq.ServingSlack, "acquisition-slack", scorecard.DefaultServingSlack, "gate: time to serving p90 may exceed the declared delay's p90 plus the cold start by this much")
	cmd.Flags().Float64Var(&acq.MaxSLODrop, "acquisition-max-slo-drop", scorecard.DefaultMaxSLODrop, "gate: the most a class's SLO attainment may fall below the drill with every replica granted at once (0.05: five points)")
	cmd.Flags().BoolVar(&live, "live", false, "also replay the latency stage's ×1 drill on the live harness (Docker; 1 replica per pool, speed 5)")
	return cmd
}
