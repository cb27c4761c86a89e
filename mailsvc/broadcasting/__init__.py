"""The broadcast fan-out: queued broadcasts written, chunk by chunk, through the one accept path."""
