"""A search for the load where speculation stops paying (`loads: {search: ...}`, issue 39): rounds of probes, each
probe a load level measured exactly as a fixed level is (launch mode: each arm launched per repeat for the round's
loads; two-URL mode: ABBA blocks), placed by `harness.search.policy` from the fit of `harness.search.fit` to what the
verdict measured so far. It knows how to run rounds, not how to fit or where to probe (harness.search) nor how an
effect is measured (harness.verdict.across_loads.search_view).

`predicted`: a run started from `speculab predict`'s prediction (`run --prediction`), the search's first round in the
predicted interval and each fixed load's predicted band.
"""
