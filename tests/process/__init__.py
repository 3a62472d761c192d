"""Tests of process set-up: gevent and logging."""
