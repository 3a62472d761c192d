"""Serving the app with gevent's WSGI server: `agentq api` and `agentq dev`.

Each connection is a greenlet, so thousands of open streams cost memory, not threads, and
the API keeps answering while they are held. Production runs the same app under gunicorn
with the same model (`gunicorn -k gevent 'agentq.web.app:create_app()'`). SIGINT or SIGTERM ends
every open stream and stops the server within a second or two.
"""
from __future__ import annotations

import gc
import logging
import signal
import socket
from collections.abc import Callable

import gevent
from flask import Flask
from gevent.pool import Pool
from gevent.pywsgi import WSGIHandler, WSGIServer

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 20_000
STOP_S = 0.5  # what the open requests get to finish once the streams were told to end


class Handler(WSGIHandler):
    """gevent's handler, with the client's socket in the environ (streaming/streams.py watches it)."""

    def get_environ(self):
        environ = super().get_environ()
        environ["agentq.socket"] = self.socket
        return environ


def make_server(app: Flask, *, host: str, port: int) -> WSGIServer:
    """A server listening on host:port (0: any free port), not yet serving."""
    listener = socket.create_server((host, port), backlog=2048)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
    return WSGIServer(listener, app, spawn=Pool(MAX_CONNECTIONS), handler_class=Handler,
                      log=None, error_log=logging.getLogger("agentq.api"))


def stopper(app: Flask, server: WSGIServer) -> Callable[[], None]:
    """End every open stream, then stop the server (requests still running get STOP_S)."""
    def stop(*_: object) -> None:
        app.extensions["agentq"].open_streams.stop()
        server.stop(timeout=STOP_S)
    return stop


def serve(app: Flask, *, host: str, port: int) -> int:
    """Serve until SIGINT or SIGTERM; 0 then."""
    server = make_server(app, host=host, port=port)
    stop = stopper(app, server)
    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, lambda: gevent.spawn(stop))
    server.start()
    gc.freeze()  # what the app built at start is never collected: shorter GC pauses later
    print(f"agentq api: serving on http://{host}:{server.server_port}", flush=True)
    server.serve_forever()
    return 0
