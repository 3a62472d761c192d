"""`python -m agentq.cli`: the same as the `agentq` command."""
import sys

from agentq.cli.main import main

sys.exit(main())
