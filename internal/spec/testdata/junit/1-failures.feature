# Two failing scenarios in a row, parsed first. The first one's steps get
# the pickle-step IDs 9 and 10: godog's own junit formatter reads step
# results in ID order as strings ("10" before "9"), takes the passed step
# for the last word, and writes status="passed" beside the <failure>, one
# short in failures=. Keep the step counts (2, then 5): other edits
# move the IDs.
Feature: Failing targets
  Scenario: an impossible target
    Given the fleet "default"
    Then interactive p99 TTFT stays below 1ms

  Scenario: a pool that does not exist
    Given the fleet "default"
    And pool use-h100-8b has 1 replica
    And the run lasts 20m
    And pool use-h100 has 2 replicas
    Then every request is accounted for
