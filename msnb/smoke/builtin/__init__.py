"""The built-in smoke: msnb's own small model, the worker that trains it in a child process, and its judge."""
