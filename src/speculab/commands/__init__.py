"""The commands: one package per `speculab` command (bench, run, compare, init, diagnose, methods), each a thin
sequence of the harness's stages, taking a typed flag record and returning what it measured or decided.

A command never renders (the CLI hands its result to the report) and never imports another command (`init` builds
a plan as `run` would, and is the one exception); what two commands share is a stage of the harness below them.
"""
