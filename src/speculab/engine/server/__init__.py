"""The engine's HTTP face: the FastAPI app (OpenAI routes, errors, limits), streaming, Prometheus metrics, launch.

It turns requests into engine calls and engine outputs into OpenAI responses; the engine itself never sees HTTP.
"""
