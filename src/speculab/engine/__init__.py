"""The reference engine (extra `[engine]`): a small, exact PyTorch server with continuous batching and speculative
decoding, serving the OpenAI API with Prometheus metrics.

It never imports the harness or the report; the only code it shares with them is `speculab.protocol`. The engine
core knows token ids only: text comes from an injected tokenizer and detokenizer.
"""
