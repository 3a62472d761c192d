"""Tests of the tool registry."""
