"""The runtime and the commands over the test's store (tests/support/turn_fixtures.py); a
module may set up its own in their place."""
from tests.support.turn_fixtures import clock, commands, providers, runtime

__all__ = ["clock", "commands", "providers", "runtime"]
