"""The page for people at /ui/: plain HTML, CSS and JavaScript from agentq/web/static, no build step.

The page is a client of /v1 like any other (it sends the API key it asks for on every
call), so it needs no session or route of its own; this blueprint only serves its files,
with a content security policy that lets them load nothing but themselves.
"""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, redirect, send_from_directory, url_for

STATIC = Path(__file__).resolve().parent.parent / "static"
# Scripts and styles from this origin only, and no inline code: text from the log that
# slipped into markup still could not run.
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

bp = Blueprint("ui", __name__, static_folder=str(STATIC), static_url_path="/ui")


@bp.get("/")
def home():
    return redirect(url_for("ui.page"))


@bp.get("/ui/", strict_slashes=True)
def page():
    return send_from_directory(STATIC, "index.html")


@bp.after_request
def protect(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response
