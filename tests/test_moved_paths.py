"""Import paths from before the folders per role keep working for a release, with a warning."""
import importlib
import sys

import pytest

from agentq.live.pubsub import PubSub
from agentq.worker.factory import create_celery
from agentq.worker.tasks import enqueue


def test_agentq_pubsub_is_the_live_pubsub_and_says_where_it_moved():
    sys.modules.pop("agentq.pubsub", None)
    with pytest.warns(DeprecationWarning, match="agentq.live.pubsub"):
        module = importlib.import_module("agentq.pubsub")
    assert module.PubSub is PubSub


@pytest.mark.parametrize(("name", "moved_to"), [("create_celery", create_celery), ("enqueue", enqueue)])
def test_the_worker_package_still_gives_its_old_names(name, moved_to):
    import agentq.worker

    with pytest.warns(DeprecationWarning, match=f"agentq.worker.{name} moved"):
        assert getattr(agentq.worker, name) is moved_to


def test_an_unknown_name_of_the_worker_package_is_still_an_attribute_error():
    import agentq.worker

    with pytest.raises(AttributeError):
        agentq.worker.no_such_name  # noqa: B018
