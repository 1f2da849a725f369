Feature: Library scenarios
  Scenario: a scenario this build lacks
    Given the library scenario "no-such-scenario"
    Then every request is accounted for
