"""Results on disk: the bench run directory and the A/B directory layout, streamed so nothing is lost.

It stores and reads records; it computes nothing and renders nothing.
"""
