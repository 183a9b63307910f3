"""What a run produced, read back: timeline, stages, knee, recording, plot, summary."""
