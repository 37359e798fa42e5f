"""Test helpers that ship with the package (a stub OpenAI-compatible server)."""
