"""Tests of the operator's policy and tenants' own keys."""
