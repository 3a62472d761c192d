"""Tests of the Procfile and docker-compose.yml as shipped."""
