"""The full-size job, checked before it is launched: the pre-flight and the per-card memory.

The smoke trains a shrunk copy of a run; what only the full-size job meets lives here, cut along its seams:

- :mod:`.launch`: the launcher's command line read as the launcher reads it (the device count, the cards a node);
- :mod:`.child`: the pre-flight's child process, which builds what the cluster builds (:mod:`.build`), with
  :mod:`.standin` answering for the cluster's communication and :mod:`.compiler_rules` stating MindSpore's
  graph-compiler rules; :mod:`.import_guards` lets mindformers import where an optional package is missing;
- :mod:`.preflight`: the front: the child started per config, its result (:class:`~.preflight.PreflightResult`) given
  YAML keys and lines, the suggestions proved (:mod:`.suggest`);
- :mod:`.sizes` (a model's sizes from the sources the run builds from), :mod:`.cards` (the cards msnb knows),
  :mod:`.memory` (the per-stage estimate behind ``msnb memory``), :mod:`.against` (the estimate beside the peaks
  MindSpore printed), :mod:`.figure` (its picture).

Only :mod:`.child`, :mod:`.build` and :mod:`.standin` import MindSpore or mindformers, and only in the child process.
"""
