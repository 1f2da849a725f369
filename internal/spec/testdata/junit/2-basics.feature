Feature: Fleet basics
  Scenario: the fleet keeps every request
    Given the fleet "default"
    Then no request leaves its jurisdiction

  Scenario: a typo in a step
    Given the fleet "default"
    When regoin us-east goes down at 10m
    Then every request is accounted for
