@twin @regional-outage
Feature: Regional outage
  A region goes dark. The gateway must notice by itself (timeouts and
  breakers), move traffic to the regions the tenants may use, and never
  move a tenant's traffic out of its jurisdiction.

  Background:
    Given the fleet "default"

  Scenario: US outage is detected, mitigated and recovered from
    When region us-east goes down at 10m for 10m
    Then the gateway detects the outage within 30s
    And the fleet recovers from the outage within 5m
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: EU outage with an EU-bound tenant keeps residency
    Given tenant research is restricted to jurisdiction eu
    When region eu-west goes down at 10m for 5m
    Then the gateway detects the outage within 30s
    And no request leaves its jurisdiction
    And interactive p99 TTFT stays below 5s after the outage + 5m
    And every request is accounted for

  # eu-west is the EU's only region, so bank-eu has nowhere to go: once the
  # breakers find it dark, its requests are refused at once with a
  # Retry-After, none left to wait out its deadline, and none served in the
  # US.
  Scenario: An EU-bound tenant with nowhere to go is refused at arrival, never left to time out
    When region eu-west goes down at 3m for 4m
    Then no request of tenant bank-eu times out during the outage
    And requests of tenant bank-eu are refused at arrival with a retry hint during the outage
    And SLO attainment of tenant bank-eu is below 90% during the outage
    And no request of tenant bank-eu leaves its jurisdiction
    And every request is accounted for

  Scenario: A replica slowed by a brownout is ejected as a latency outlier
    When pool euw-a100-8b browns out at 3m for 2m with 1500ms added latency
    Then a replica of pool euw-a100-8b is ejected within 30s
    And no request is lost during the brownout

  Scenario: One slow replica of a pool is ejected, its healthy peers are not
    When 1 replica of pool euw-a100-8b browns out at 3m for 2m with 1500ms added latency
    Then a replica of pool euw-a100-8b is ejected within 30s
    And no request is lost during the brownout
    And every request is accounted for
