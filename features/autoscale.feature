@twin @autoscale
Feature: Autoscaling in an outage: capacity that arrives late, in part, or not at all
  The gameday-autoscale-stockout game day: us-east goes dark at the
  workload's peak and its traffic fails over to us-west, whose H100 pool
  autoscales on queue depth (4 waiting requests per replica, 3 to 11
  replicas). The autoscaler asks for 8 more H100s at its first sync after
  the failover; the provider grants a quarter of the ask after 6 minutes
  (plus the 2-minute model load) and a stockout refuses the rest at every
  retry. Autoscaling is a request, not capacity. The runs are cut to 20
  minutes (the outage runs to the end) to keep them fast; the figures in
  the comments are measured at the scenario's seed 5.

  Background:
    Given the fleet "gameday-autoscale-stockout"
    And the fleet's own expectations are dropped
    And the run lasts 20m

  Scenario: As it happened: 8 replicas asked for, 2 granted late, the rest refused by the stockout
    # Scale up 3 → 11 at 10m15s; 2 of 8 granted, serving 8m00s after the
    # ask; 60 asks refused (stockout); 3 to 5 replicas serving.
    Then pool usw-h100-8b asks for 8 more replicas
    And pool usw-h100-8b scales up to 11 replicas
    And pool usw-h100-8b is granted at most 2 replicas
    And the provider refuses replicas for "stockout"
    And no replica of pool usw-h100-8b serves sooner than 7m after it was asked for
    And pool usw-h100-8b serves new replicas within 9m of asking
    And pool usw-h100-8b never serves more than 5 replicas
    And pool usw-h100-8b always serves at least 3 replicas
    And no request leaves its jurisdiction
    And every request is accounted for

  Scenario: Written as steps, with 5 replicas reserved: 2 are granted at once past the stockout
    # The 3 running hold 3 of the reservation; the other 2 are granted at
    # the first ask with no provisioning delay (serving 2m00s after it, the
    # model load), 2 more on demand from the quarter granted, 8m00s after.
    Given there are no faults
    And pool usw-h100-8b autoscales on queue depth 4 between 3 and 11 replicas
    And the provider of pool usw-h100-8b grants replicas after 6m
    And pool usw-h100-8b holds 5 reserved replicas
    When region us-east goes down at 10m for 15m
    And the provider of pool usw-h100-8b grants a quarter of what is asked from 10m for 1m
    And the provider of pool usw-h100-8b is out of stock from 11m
    Then pool usw-h100-8b asks for 8 more replicas
    And pool usw-h100-8b is granted at least 4 replicas
    And the report shows autoscaling.usw-h100-8b.reserved == 2
    And the report shows autoscaling.usw-h100-8b.to_serving.p50 < 3m
    And the provider refuses replicas of pool usw-h100-8b for "stockout"
    And pool usw-h100-8b never serves more than 7 replicas
    And no request leaves its jurisdiction

  Scenario: A quota cap refuses what a stockout would have
    # 3 H100s running and a cap of 4 at gpu-cloud-b: 1 of the 8 asked for
    # is granted, 70 asks are refused (quota), none by a stockout.
    Given there are no faults
    When region us-east goes down at 10m for 15m
    And the account at gpu-cloud-b is capped at 4 GPUs
    Then pool usw-h100-8b asks for 8 more replicas
    And pool usw-h100-8b is granted at most 1 replica
    And the provider refuses replicas for "quota"
    And the provider refuses no replicas for "stockout"
    And pool usw-h100-8b never serves more than 4 replicas
