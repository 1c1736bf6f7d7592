"""bitexact: prove that an inference engine's tokens and logprobs are bit for bit what they should be."""

__version__ = "0.1.0"
