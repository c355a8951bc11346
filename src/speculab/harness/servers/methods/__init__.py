"""Which speculation methods can run here: what an engine's installed release declares, what a checkpoint's files
say (MTP layers, a draft's vocabulary, an EAGLE/Medusa head's base model), and the table joining them.

It reads files and asks engines about themselves; it never launches a server, never downloads, never imports torch.
"""
