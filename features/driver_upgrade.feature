@twin @driver-upgrade
Feature: Driver upgrade
  A pool's driver is upgraded: its replicas restart (a cold start), and a
  driver below what the runtime or the model needs takes the pool out of
  routing until it is rolled back.

  Background:
    Given the fleet "default"

  Scenario: A compatible upgrade restarts one pool
    When pool use-h100-8b upgrades its driver to 570.172.08 at 10m for 10m
    Then no request leaves its jurisdiction
    And interactive p99 TTFT stays below 10s after the upgrade + 5m
    And every request is accounted for

  Scenario: A bad driver, below the runtime's minimum, is rolled back
    When pool use-h100-8b upgrades its driver to 560.28 at 10m for 10m
    Then the gateway detects the upgrade within 1s
    And the fleet recovers from the upgrade within 5m
    And at most 2000 requests are lost during the upgrade
    And interactive SLO attainment is at least 90% after the upgrade + 5m
    And every request is accounted for
