"""The console scripts' front doors (one module per command)."""
