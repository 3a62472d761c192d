"""gunicorn settings for the agentq API, read by default from the working directory.

Only logging: gunicorn's own lines, its access log and the app's all come out in
AGENTQ_LOG_FORMAT (`plain` or `json`), at gunicorn's --log-level. Everything else stays
on the command line (Procfile, docker-compose.yml).
"""
from gunicorn.glogging import Logger

from agentq.config import Config
from agentq.logconfig import configure, use_format


class AgentqLogger(Logger):
    """gunicorn's logger, its handlers reformatted each time gunicorn (re)builds them."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        log_format = Config.from_env().log_format
        configure(log_format, level=cfg.loglevel.upper())
        use_format(self.error_log, log_format)
        use_format(self.access_log, log_format)


logger_class = AgentqLogger
