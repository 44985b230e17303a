"""The tests' own stand-in for a cluster's communication, apart from msnb's (``msnb.fullsize.standin``).

Tests that prove a pre-flight finding or an estimate build the full-size network with mindformers' own code in a
child of their own; this is the one stand-in they share, written independently of the code under test: rank 0 of
``RANK_SIZE`` devices, each created group of the ranks it was given; and the run's contexts set by hand
(:data:`CLUSTER_CONTEXT`).  Prepended to a child's script.
"""

CLUSTER_STANDIN = r"""
import mindspore as ms
import mindspore.communication._comm_helper as helper
import mindspore.communication.management as management
from mindformers.parallel_core.inference import parallel_state

ms.set_device("CPU")
groups = {}
management._get_rank_helper = lambda group: 0
management._get_size_helper = lambda group: len(groups.get(group, ())) or int(os.environ["RANK_SIZE"])
management._create_group_helper = lambda group, ranks, options=None: groups.__setitem__(group, list(ranks))
helper._is_initialized = parallel_state._is_initialized = lambda: True
helper.GlobalComm.INITED = True
"""

CLUSTER_CONTEXT = r"""
def cluster_context(config, devices):
    # mindformers' own contexts once a process (CPU affinity is set once), without starting communication; then the
    # run's parallel context for *devices*, set by hand as build_context sets it
    import copy
    from mindformers.core.context.build_context import Context

    if not Context.is_exists():
        alone = copy.deepcopy(config)
        alone.use_parallel = False
        alone.context.device_target = "CPU"
        Context(alone)
    ms.reset_auto_parallel_context()
    pipeline = dict((config.get("parallel") or {}).get("pipeline_config") or {})
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=devices,
                                 pipeline_stages=config.parallel_config.pipeline_stage, **({"pipeline_config": pipeline} if pipeline else {}))
"""
