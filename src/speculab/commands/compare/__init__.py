"""`speculab compare A B`: two results (bench directories or other tools' files, read by `harness.imports`) paired
into the saved A/B run the verdict reads. It knows nothing of launching servers or sending requests."""
