"""The image's entrypoint: refuse to start on the wrong card, with missing weights or an unpatched
engine, each with a message that says which; otherwise exec bitexact-server reachable from outside."""

from image_entrypoint.checks import PreflightError

__all__ = ["PreflightError"]
