"""Tests of the store on SQLite and PostgreSQL, and its migrations."""
