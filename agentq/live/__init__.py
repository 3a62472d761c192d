"""Live streams: pub/sub of deltas and new events, and the fan-out of one subscription to many streams."""
