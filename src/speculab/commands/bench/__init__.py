"""`speculab bench`: one measured run of one endpoint, written to a run directory."""
