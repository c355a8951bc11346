"""`speculab run | compare | demo | init`: the A/B plan, the run's record and block runner, launch and two-URL modes.

It writes results in the A/B layout (`speculab.harness.results`); it never renders (that is the report package's job).
"""
