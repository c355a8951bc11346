"""The OpenAI wire format shared by client and server: request schemas, response and chunk builders, one SSE decoder.
What keeps either server up under abusive clients is the serving base's (`speculab.serving`), not the wire format's.

It is the only code the harness and the engine share: it imports neither of them, nor torch.
"""
