"""What the built-in smoke and the mindformers rehearsal share: the checks and their verdict, the judge's common checks, the step callbacks of both workers."""
