"""The OpenAI wire format shared by client and server: request schemas, response and chunk builders, one SSE decoder;
and what keeps either server up under abusive clients (exhaustion.py: descriptors, slow requests, log volume).

It is the only code the harness and the engine share: it imports neither of them, nor torch.
"""
