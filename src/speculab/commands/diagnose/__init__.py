"""`speculab diagnose`: measured phases (cold start, prefill sweep, shared prefix, load) and their pure analysis."""
