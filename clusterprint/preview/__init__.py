"""What ``pulumi up`` would do, offline: the plan, its summary and cost, diffs, rollouts, policies.

The plan runs the components under Pulumi's mocks; everything else reads plans as plain data
(the policy pack imports ``policies`` alone, without Pulumi's engine).
"""
