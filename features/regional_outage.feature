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
