"""Tests of the HTTP API, its streams and the page."""
