"""`speculab run` (and `speculab demo`, a run of the demo experiment): the A/B plan, the run's record and block
runner, the launch and two-URL modes, resume, and the configuration to ship.

It writes results in the A/B layout (`speculab.harness.results`); it never renders (that is the report package's job).
"""
