"""speculab: does speculative decoding make my endpoint faster and cheaper, and is it still correct?"""

__version__ = "0.1.0"
