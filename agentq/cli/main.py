"""The `agentq` command's entry point: gevent first, then the program.

`agentq api` and `agentq dev` serve with gevent, which must patch the process before the
program's modules are imported (agentq.process.cooperative); so this module imports
nothing else, and loads agentq.cli.program only once the patch is in.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

from agentq.process.cooperative import patch_for


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentq` command line `argv` (default: the process's); its exit status."""
    patch_for(sys.argv[1:])  # the process's own command line: what it serves decides
    from agentq.cli.program import run  # only now, patched

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
