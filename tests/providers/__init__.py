"""Provider adapter tests: recorded wire payloads replayed through mock HTTP transports."""
