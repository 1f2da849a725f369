@twin @canary
Feature: Canary and shadow traffic to a new provider
  Moving traffic to new capacity safely. A neocloud's H100 pool
  (neo-h100) takes a share of the US chat traffic beside the incumbent
  (use-h100-8b), with a shadow copy of a tenth of the eligible requests.
  When the neocloud browns out, the canary's own checks (error rate over
  2 %, TTFT p99 over the class's 2 s, judged every 30 s over a 2-minute
  window of at least 20 canary attempts) send its share back to the
  incumbent; the failed canary attempts are retried there, so no client
  loses an answer, and the shadow copies are never anyone's answer.

  Background:
    Given the fleet "testdata/neocloud.yaml"

  Scenario: A browned-out canary is rolled back within the window plus one evaluation
    Given a canary of "neo-h100" at 5% for "retail"
    And shadow traffic of 10% to "neo-h100"
    When pool neo-h100 browns out at 12m for 5m with 30% of requests failing and 800ms added latency
    # Measured at seed 23: rolled back 30 s after the brownout began.
    Then the canary is rolled back within 2m30s
    And no request is lost during the brownout
    And the report shows canaries.neo-h100.share == 0
    And shadow traffic never reaches the tenant
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: A healthy canary keeps its share
    Given a canary of "neo-h100" at 5% for "retail"
    Then the canary is not rolled back
    And the report shows canaries.neo-h100.share == 0.05
    And the report shows canaries.neo-h100.canary.attempts > 100

  Scenario: Latency alone rolls the canary back when it breaks the class objective
    Given a canary of "neo-h100" at 5% for "retail"
    When pool neo-h100 adds 2s latency at 12m for 5m
    Then the canary is rolled back within 2m30s
    And no request is lost during the latency fault

  Scenario: A shadow-only route takes the brownout and no client sees it
    Given shadow traffic of 20% to "neo-h100"
    When pool neo-h100 browns out at 12m for 5m with 30% of requests failing
    Then the canary is not rolled back
    And the report shows canaries.neo-h100.shadow.failed > 0
    And shadow traffic never reaches the tenant
    And no request is lost during the brownout

  Scenario: A healthy stepped rollout is promoted on schedule
    Given the setting canaries is [{name: neo, model: llama-3.1-8b, candidate: [neo-h100], steps: [{share: 0.05, for: 5m}, {share: 1}], rollback_if: ["error_rate > 2%"]}]
    Then the canary is promoted to 100% within 6m
    And the canary is not rolled back
