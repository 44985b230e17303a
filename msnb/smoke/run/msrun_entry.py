"""msrun runs a script, not a module: this file starts the smoke worker for each rank (msnb's, or the mindformers one)."""

import json
import sys

if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        mindformers = bool(json.load(f).get("mindformers_model"))
    if mindformers:
        from msnb.smoke.mindformers.worker import main
    else:
        from msnb.smoke.builtin.worker import main
    sys.exit(main(sys.argv[1]))
