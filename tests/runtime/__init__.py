"""Tests of what a worker does: steps, timers, leases, the sweeper, transcripts."""
