"""The mindformers rehearsal: a user's run YAML planned (every change recorded), trained in a child process through mindformers' own Trainer, and judged.

No module here but the worker and the CPU rehearsal (both run in the child only) imports MindSpore or mindformers.
"""
