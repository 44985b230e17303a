"""Scripts that write real event files with the real writers, in a child process.

Each writes its files and ``expected.json``: the same files decoded with the
writer's own protobuf classes, for value-for-value comparison with msnb.
"""
