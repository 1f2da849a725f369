@twin @library
Feature: The scenario library
  Every library scenario runs on the twin, passes its own expectations and
  accounts for every request. A scenario this build does not have, or one
  that replays a trace not beside the checkout, is skipped with the reason.

  Scenario Outline: <scenario>
    Given the library scenario "<scenario>"
    Then every expectation of the scenario holds
    And every request is accounted for

    Examples: the core library
      | scenario        |
      | default         |
      | eu-residency    |
      | mmc             |
      | mooncake-prefix |

    Examples: game days
      | scenario                   |
      | gameday-autoscale-stockout |
      | gameday-canary-rollback    |
      | gameday-cpu-fallback       |
      | gameday-driver-upgrade     |
      | gameday-full               |
      | gameday-model-retirement   |
      | gameday-pd-link            |
      | gameday-quota-exhaustion   |
      | gameday-regional-outage    |
      | gameday-retry-storm        |
      | gameday-spot-loss          |

  Scenario: The regional-outage game day keeps EU traffic in the EU
    Given the library scenario "gameday-regional-outage"
    Then the gateway detects the outage within 1m
    And no request leaves its jurisdiction

  Scenario: The canary game day rolls its canary back at the trace's peak, unseen by clients
    Given the library scenario "gameday-canary-rollback"
    Then the canary is rolled back within 2m15s
    And shadow traffic never reaches the tenant
