@twin @quota-exhaustion
Feature: Quota exhaustion
  A provider's quota runs out. Requests over it are refused with a 429;
  the gateway must see the refusals and move traffic to pools of another
  provider where the tenant may go.

  Background:
    Given the fleet "default"

  Scenario: The US provider's quota is cut to zero
    When the quota of provider gpu-cloud-a is exhausted at 10m for 10m
    Then the gateway detects the quota exhaustion within 30s
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: The EU provider is throttled; EU-bound traffic stays in the EU
    When the quota of provider gpu-cloud-b drops to 30 requests and 60000 tokens per minute at 10m for 5m
    Then the gateway detects the quota exhaustion within 1m
    And no request leaves its jurisdiction
    And interactive SLO attainment is at least 90% after the quota exhaustion + 5m
    And every request is accounted for
