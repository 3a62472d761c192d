"""Tests of Celery workers, their tasks, transport and events."""
