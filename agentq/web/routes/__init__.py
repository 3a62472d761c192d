"""The HTTP API's blueprints, one per resource, and the page for people."""
