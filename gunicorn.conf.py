"""gunicorn settings for the agentq API, read by default from the working directory.

Logging: gunicorn's own lines, its access log and the app's all come out in
AGENTQ_LOG_FORMAT (`plain` or `json`), at gunicorn's --log-level. And the live streams of
a gevent worker (`-k gevent`): when the worker is told to stop, its streams end at once
instead of holding it for the graceful timeout. Everything else stays on the command line
(Procfile, docker-compose.yml).

Careful: this file is read by gunicorn's master before any worker patches itself with
gevent, so it must not import what talks to the network (psycopg, redis, the app).
"""
import gc

from gunicorn.glogging import Logger

from agentq.config import Config
from agentq.process.logs import configure, use_format


class AgentqLogger(Logger):
    """gunicorn's logger, its handlers reformatted each time gunicorn (re)builds them."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        log_format = Config.from_env().log_format
        configure(log_format, level=cfg.loglevel.upper())
        use_format(self.error_log, log_format)
        use_format(self.access_log, log_format)


logger_class = AgentqLogger


def post_worker_init(worker) -> None:
    """Once the app is loaded: freeze what it built (shorter GC pauses), watch for the stop."""
    gc.freeze()
    if worker.__class__.__module__.startswith("gunicorn.workers.ggevent"):
        import gevent

        gevent.spawn(_end_streams_on_stop, worker)


def _end_streams_on_stop(worker) -> None:
    import gevent

    while worker.alive:
        gevent.sleep(0.2)
    services = getattr(worker.wsgi, "extensions", {}).get("agentq")
    if services is not None:
        services.open_streams.stop()
