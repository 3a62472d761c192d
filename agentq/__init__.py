"""agentq: durable LLM-agent conversations on Celery, PostgreSQL and Flask."""
