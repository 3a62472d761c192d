"""The agentq.worker package: `app` is its one attribute built on first access."""
import pytest


def test_an_unknown_name_of_the_worker_package_is_still_an_attribute_error():
    import agentq.worker

    with pytest.raises(AttributeError):
        agentq.worker.no_such_name  # noqa: B018
