"""Adapters to other frameworks; each module imports its framework, installed as an optional extra."""
