"""Server-sent event streams: the frames, the limits on open streams, and the shared reads behind them."""
