"""`speculab init --url`: detect the engine behind a URL and write a starter experiment file that fits its context
and loads. It sends only probes (no load) and knows nothing of the verdict."""
