"""Serving the app with werkzeug's threaded server: `agentq api` and `agentq dev`.

Good for one machine and for tests; production runs the same app under gunicorn
(`gunicorn -k gthread --threads 64 'web.app:create_app()'`), where each open stream
holds one thread.
"""
from __future__ import annotations

import threading

from flask import Flask
from werkzeug.serving import BaseWSGIServer, make_server


def serve(app: Flask, *, host: str, port: int) -> int:
    """Serve until interrupted; 0 on Ctrl-C."""
    server = make_server(host, port, app, threaded=True)
    print(f"agentq api: serving on http://{host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def serve_in_thread(app: Flask, *, host: str, port: int) -> BaseWSGIServer:
    """Serve from a daemon thread; call `shutdown()` on the result to stop."""
    server = make_server(host, port, app, threaded=True)
    threading.Thread(target=server.serve_forever, name="agentq-api", daemon=True).start()
    return server
