@twin @policy
Feature: Policies compared through a regional outage
  The same EU outage (the gameday-regional-outage fleet: eu-west dark from
  10m for 15m) judged under different gateway policies. Each row is a
  policy and what it must achieve; the table is the comparison.

  Scenario Outline: a <timeout> health-check timeout detects the outage within <detect>
    Given the fleet "gameday-regional-outage"
    And the setting policy.health.timeout is <timeout>
    Then the gateway detects the outage within <detect>
    And at most 8 requests are lost during the outage
    And no request leaves its jurisdiction

    # A breaker opens after three failed attempts, each failing only when
    # its timeout expires: detection grows with the timeout (measured at
    # seed 11: 4.5 s, 9.0 s, 19.0 s, 34.0 s). Whatever the timeout, the
    # streams the outage cuts mid-answer are lost (no retry can splice a
    # second answer on; 1 at seed 11, 0 to 6 over seeds 11-30); every
    # other request caught by it is retried in eu-central.
    Examples:
      | timeout | detect |
      | 2s      | 6s     |
      | 5s      | 10s    |
      | 15s     | 20s    |
      | 30s     | 35s    |

  Scenario Outline: <strategy> routing keeps interactive p99 TTFT below <ttft> during the outage
    Given the fleet "gameday-regional-outage"
    And the routing strategy is <strategy>
    Then interactive p99 TTFT stays below <ttft> during the outage
    And interactive SLO attainment is at least 99% during the outage
    And no request leaves its jurisdiction

    # Measured p99: 336 ms, 343 ms, 310 ms, 357 ms, 350 ms.
    Examples:
      | strategy       | ttft  |
      | least-loaded   | 400ms |
      | ordered        | 400ms |
      | lowest-latency | 350ms |
      | cheapest       | 400ms |
      | round-robin    | 400ms |
