"""Celery settings an operator of agentq may tune; the values here are agentq's defaults.

agentq reads this module when it is importable (run the worker from the project directory,
or put it on PYTHONPATH) and applies it over the defaults in agentq.worker.factory, so
deleting it changes nothing. AGENTQ_* environment variables set the broker and database.
What agentq relies on for correctness is set there and not meant to change: late acks, a
prefetch of one, JSON messages, no results.
"""

# Task events feed Flower. Off: Flower shows no tasks, and each step costs a little less.
worker_send_task_events = True
# A task-sent event for every step costs each step about 15% (bench/steps.py); on, Flower
# shows tasks that are queued but not yet received.
task_send_sent_event = False
# Redis: the broker is only a trigger. With `ack_emulation` off (agentq's default) Redis
# keeps no copy of a task a worker took: if the worker dies, the ledger and the sweeper take
# its steps and its pending calls' deadlines up again, and each task costs two Redis round
# trips less. On (kombu's default), such a task also comes back, a second time, after the
# visibility timeout; ETA tasks (deadlines of pending calls, retries) wait in worker memory
# meanwhile: keep them few and well under it.
broker_transport_options = {"visibility_timeout": 300, "ack_emulation": False}
worker_eta_task_limit = 1000
