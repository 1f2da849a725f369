@twin @policy
Feature: Schedulers under a regional outage
  The same outage, judged under each scheduler: the interactive class
  keeps its objective during the outage whatever the dispatch order.

  Scenario Outline: <scheduler> through a US outage
    Given the fleet "default"
    And the scheduler is <scheduler>
    When region us-east goes down at 10m for 10m
    Then interactive p99 TTFT stays below <ttft> during the outage
    And interactive SLO attainment is at least <attainment> after recovery + 5m
    And no request leaves its jurisdiction

    Examples:
      | scheduler | ttft | attainment |
      | fifo      | 200s | 90%        |
      | priority  | 200s | 90%        |
      | wfq       | 200s | 90%        |
      | edf       | 200s | 90%        |
