"""Live video of the native adapter: capture to H.264/NV12 frames, the loopback
WebSocket listener, and per-viewer ack flow control."""
