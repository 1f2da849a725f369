Feature: Who an EU outage leaves stranded
  eu-residency has two tenants bound to eu-west and one, global, that may
  go anywhere. With eu-west down from 5m to 15m of a 20m run, global is
  served in the US; bank-eu has nowhere to go. Each scenario names whether
  it passes or fails; the test checks every one.

  Background:
    Given the fleet "eu-residency"
    And the fleet's own expectations are dropped
    When region eu-west goes down at 5m for 10m

  Scenario: passes: global is mitigated in the US
    Then the gateway mitigates the outage for tenant global within 1m
    And tenant global is served elsewhere during the outage
    And tenant global is served in pool use-h100-8b during the outage
    And class interactive is served by model llama-3.1-8b during the outage
    And tenant global loses no requests during the outage
    And no request of tenant global times out during the outage
    And tenant global SLO attainment is at least 99% during the outage
    And the fleet recovers from the outage for tenant bank-eu within 1m
    And a breaker opens on pool euw-a100-8b during the outage
    And no breaker opens on pool use-h100-8b
    And at most 2000 requests time out during the outage
    And pool use-h100-8b serves at least 90% of the requests during the outage

  Scenario: fails: the EU serves the traffic during the outage
    Then pool euw-a100-8b serves at least 10% of the requests during the outage

  Scenario: fails: bank-eu is never mitigated
    Then the gateway mitigates the outage for tenant bank-eu within 1m

  Scenario: fails: bank-eu is not served elsewhere
    Then tenant bank-eu is served elsewhere during the outage

  Scenario: fails: bank-eu is not served in the US
    Then tenant bank-eu is served in pool use-h100-8b during the outage

  Scenario: fails: bank-eu loses requests
    Then tenant bank-eu loses at most 5 requests during the outage

  # Once the breakers find eu-west dark, the deadline check counts on
  # nothing from it: bank-eu is refused at once, never left to time out.
  Scenario: passes: bank-eu is refused at arrival, never left to time out
    Then no request of tenant bank-eu times out during the outage
    And requests of tenant bank-eu are refused at arrival with a retry hint during the outage
    And SLO attainment of tenant bank-eu is below 90% during the outage
    And no request of tenant bank-eu leaves its jurisdiction

  Scenario: fails: global's attainment is not below 90%
    Then SLO attainment of tenant global is below 90% during the outage

  Scenario: fails: global is served, not refused
    Then requests of tenant global are refused at arrival with a retry hint during the outage

  Scenario: fails: residency broken for bank-eu
    Given the routing ignores residency
    Then no request of tenant bank-eu leaves its jurisdiction

  Scenario: passes: an EU replica slowed by a brownout is ejected
    When pool euw-a100-8b browns out at 16m for 2m with 1500ms added latency
    Then a replica of pool euw-a100-8b is ejected within 30s

  Scenario: fails: no EU replica is ejected by the outage
    Then a replica of pool euw-a100-8b is ejected within 30s

  Scenario: fails: bank-eu misses its SLO
    Then tenant bank-eu SLO attainment is at least 99% during the outage

  Scenario: fails: breakers open in the EU
    Then no breaker opens during the outage

  Scenario: fails: no breaker opens in the US
    Then a breaker opens on pool use-h100-8b

  Scenario: passes: no request times out during the outage
    Then no request times out during the outage
