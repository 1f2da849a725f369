@twin
Feature: Disaggregated prefill and decode
  A split fleet moves each remotely prefilled prompt's KV cache over a link
  the health checks do not watch. These specs hold the P/D game day to
  what an SRE expects of it: a silent fallback to TCP costs the tenant
  with long prompts, not the chat tenant whose prompts prefill locally,
  and losing the prefill pool costs nothing under the conditional decider.

  Scenario: A silent TCP fallback hurts long prompts, and no breaker sees it
    Given the library scenario "gameday-pd-link"
    Then tenant docs-search loses at most 2000 requests during the link degradation
    And tenant chat loses at most 100 requests during the link degradation
    And no breaker opens on pool use-h100-decode during the link degradation
    And the report shows disaggregation.transfer_s.p99 > 10s
    And every request is accounted for

  Scenario: The conditional decider absorbs the loss of the prefill pool
    Given the library scenario "gameday-pd-link"
    Then no request is lost during the node loss
    And the gateway mitigates the node loss within 10s
    And the fleet recovers from the node loss within 3m

  Scenario: Failed transfers answered with errors trip the decode breakers
    # vLLM's default kv_load_failure_policy, fail: the decode replica
    # answers 500, its breaker counts it, and half the transfers failing
    # opens the breakers of a healthy decode pool.
    Given the library scenario "gameday-pd-link"
    When 50% of the KV transfers into pool use-h100-decode fail at 30m for 2m
    Then a breaker opens on pool use-h100-decode during the transfer failure
    And the report shows disaggregation.failed > 0
    And every request is accounted for

  Scenario: Recomputing failed transfers on the decode replica loses nothing
    Given the library scenario "gameday-pd-link"
    And the setting pools.use-h100-decode.kv_load_failure_policy is recompute
    When 50% of the KV transfers into pool use-h100-decode fail at 30m for 2m
    Then no request is lost during the transfer failure
    And no breaker opens on pool use-h100-decode during the transfer failure
    And the report shows disaggregation.recomputed > 0
