"""Tests of model providers against their strict emulators, the retry policy and the circuit breakers."""
