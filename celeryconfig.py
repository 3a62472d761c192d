"""Celery settings for agentq workers; AGENTQ_* environment variables override the URLs.

agentq reads this module when it is importable (run the worker from the project
directory, or put it on PYTHONPATH); the same values are built in as defaults.
"""

task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
task_serializer = "json"
accept_content = ["json"]
result_serializer = "json"
task_ignore_result = True
# One (disabled) result backend per process: Celery otherwise builds one per thread, which
# under gevent is one for every task that sends a follow-up.
result_backend_thread_safe = True
worker_send_task_events = True
# Off: a task-sent event for every step costs each step about 15% (bench/steps.py); turn it
# on to see tasks that are queued but not yet received in Flower.
task_send_sent_event = False
# ETA tasks live in worker memory; keep them few and well under the visibility timeout.
broker_transport_options = {"visibility_timeout": 300}
worker_eta_task_limit = 1000
broker_connection_retry_on_startup = True
