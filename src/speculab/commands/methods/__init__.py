"""`speculab methods`: which speculation methods can run here, from the engine's release and the user's checkpoints.

The reading itself (declared methods, checkpoints, vocabularies, the table) is the servers stage's
(`harness.servers.methods`), since `init` and `run` check methods too; this package only turns the flags into it.
"""
