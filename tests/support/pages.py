"""The documentation's code, as the tests that run it read it: a page's fenced blocks by their
info string (```python crm_server.py, ```sh serve, …)."""
from __future__ import annotations

import re
from pathlib import Path


def block(info: str, page: Path) -> str:
    """The fenced block of `page` whose info string is `info`."""
    found = re.search(rf"^```{re.escape(info)}\n(.*?)^```$", page.read_text(), flags=re.M | re.S)
    assert found, f"{page.name} has no ```{info} block"
    return found.group(1)
