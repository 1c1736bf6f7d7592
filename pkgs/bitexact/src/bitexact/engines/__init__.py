"""Engines: where generations come from (HTTP servers, in-process transformers, SGLang's Engine)."""
