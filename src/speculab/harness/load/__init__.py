"""Offered load: pure, seeded arrival schedules and the runner that sends requests on them.

It knows nothing about HTTP or the OpenAI format: it calls an injected request function.
"""
