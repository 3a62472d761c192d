"""What a process made as it started, set aside from the cyclic garbage collector once it is ready."""
from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect once, then move every object the process holds now to the collector's
    permanent generation, where no later collection walks it.

    Each full collection walks every object the collector tracks, and in a worker that is
    ready most of them were made at start (modules, classes, functions, the runtime) and
    live as long as the process. A full collection stops every green thread of the
    process while it walks: in the peer bench's latency run, about 0.2 s for a gevent
    worker's 165,000 objects. Frozen, they are not walked again, and a full collection
    walks what the process made since (about 35,000 objects there, 0.06 s).

    The price: an object made before this and left in a reference cycle later is never
    freed. Made once at start, such objects are few, and they do not grow with the work.
    """
    gc.collect()
    gc.freeze()
