"""The smoke runner: options, preparing, launching the child under its guard, watching it, judging what it wrote (with :mod:`msnb.smoke.builtin` or :mod:`msnb.smoke.mindformers`), and the result."""
