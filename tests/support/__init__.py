"""Helpers the tests share: processes, API and store set-up, emulated providers, hooks."""
