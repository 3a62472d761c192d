"""The pure core of agentq: values, decisions and renderings, with no I/O.

Only the standard library, pydantic and agentq.core may be imported here.
"""
