@twin @model-retirement
Feature: Model retirement
  A model is withdrawn. With notice, new requests are steered to its
  fallbacks above their class's quality floor; the rest are refused.

  Background:
    Given the fleet "default"
    And fallback to smaller models is on

  Scenario: 70B retired with notice, chat falls back to 8B
    When model llama-3.1-70b is retired at 15m with 5m notice
    Then the gateway detects the retirement within 6m
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: 70B retired without notice
    When model llama-3.1-70b is retired at 15m
    Then the gateway detects the retirement within 1m
    And interactive p99 TTFT stays below 5s during the retirement
    And every request is accounted for
