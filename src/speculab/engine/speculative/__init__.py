"""Speculative decoding for the engine: proposers (n-gram prompt lookup, draft model) and exact verification.

It knows nothing about HTTP or text: it sees sequences of token ids and logits, through the engine's
`SpeculationHook`.
"""
