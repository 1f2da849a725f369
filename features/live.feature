@live
Feature: The four named faults on the live fleet
  The same failover specs as on the twin, run end to end on the live
  harness: emulated nodes in Docker containers, one network per region,
  toxiproxy in front of each, the live gateway running the scheduler core on
  a compressed wall clock, and each fault injected for real (docs/live.md).
  One container per pool and a quarter of the default load keep a run under
  a minute on two cores.

  Background:
    Given the fleet "default"
    And there are no faults
    And the live fleet runs at speed 5 with 1 replica per pool
    And the run lasts 3m
    And the setting warmup is 0s
    And the setting drain is 1m
    And the workload is scaled by 0.25

  Scenario: A regional outage is detected by timeouts and the fleet recovers
    When region us-east goes down at 1m for 1m
    Then the gateway detects the outage within 30s
    And the fleet recovers from the outage within 1m
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: An exhausted provider quota is detected from its 429s
    When the quota of provider gpu-cloud-a is exhausted at 1m for 1m
    Then the gateway detects the quota exhaustion within 30s
    And the fleet recovers from the quota exhaustion within 1m
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: A retired model's traffic moves to its fallback on notice
    When model llama-3.1-70b is retired at 2m with 1m notice
    Then the report shows requests.fallbacks > 0
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: A driver the runtime cannot use takes a pool out until the rollback
    When pool use-h100-8b upgrades its driver to 535.104 at 1m for 1m
    Then the gateway detects the upgrade within 30s
    And the fleet recovers from the upgrade within 2m
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: Every request is accounted for once across a node's restart
    When 1 replica of pool use-h100-8b is lost at 1m for 1m
    Then the gateway detects the node loss within 30s
    And no request leaves its jurisdiction
    And every request is accounted for
