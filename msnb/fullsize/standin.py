"""One process standing in for a whole cluster's communication, so that mindformers builds the full-size network on CPU.

A real run calls ``mindspore.communication.init()`` (HCCL on Ascend) before it builds anything; mindformers then asks
for its rank, the world size and the groups it creates (``initialize_model_parallel``, the tensor-parallel group of
the first ``RowParallelLinear``) while the model's constructors run their checks.  A CPU has no HCCL, and MindSpore's
dry run refuses a distributed job on CPU, so the pre-flight's child answers those questions itself: it is rank 0 of
*world* devices, and each group mindformers creates has the ranks mindformers gave it.  Nothing is sent anywhere:
building the network asks only sizes and ranks.  Everything replaced is named in :data:`STOOD_IN`, restored on exit,
and said in the pre-flight's result.
"""

from __future__ import annotations

import contextlib

STOOD_IN = (
    "communication: this process answers as rank 0 of the launch's devices (mindspore.communication's init, "
    "get_rank, get_group_size and create_group; each group mindformers creates has the ranks it named); no data is sent"
)


class _Cluster:
    """Rank 0 of *world* devices, and the groups created so far (name -> their global ranks)."""

    def __init__(self, world: int):
        self.world, self.rank, self.groups = world, 0, {}

    def size(self, group=None) -> int:
        ranks = self.groups.get(group)
        return len(ranks) if ranks is not None else self.world

    def group_rank(self, group=None) -> int:
        ranks = self.groups.get(group)
        return ranks.index(self.rank) if ranks is not None and self.rank in ranks else self.rank

    def create(self, group, rank_ids, options=None) -> None:
        self.groups[group] = [int(r) for r in rank_ids]

    def world_to_group(self, world_rank_id, group) -> int:
        return self.groups[group].index(world_rank_id)

    def group_to_world(self, group, group_rank_id) -> int:
        return self.groups[group][group_rank_id]


@contextlib.contextmanager
def cluster_standin(world: int):
    """Within the block, MindSpore's communication answers as rank 0 of *world* devices (see the module's docstring)."""
    # deferred: MindSpore and mindformers, in the pre-flight's child only
    import mindspore.communication._comm_helper as helper
    import mindspore.communication.management as management
    from mindformers.core.context import parallel as mf_parallel
    from mindformers.parallel_core.inference import parallel_state

    cluster = _Cluster(world)
    replaced = [
        (management, "_get_rank_helper", cluster.group_rank),
        (management, "_get_size_helper", cluster.size),
        (management, "_create_group_helper", cluster.create),
        (management, "_get_group_rank_from_world_rank_helper", cluster.world_to_group),
        (management, "_get_world_rank_from_group_rank_helper", cluster.group_to_world),
        (management, "_get_local_rank_helper", cluster.group_rank),
        (management, "_get_local_size_helper", lambda group=None: min(cluster.size(group), 8)),
        (helper, "_is_initialized", lambda: True),
        (parallel_state, "_is_initialized", lambda: True),  # imported by name before the block
        (mf_parallel, "init", lambda *args, **kwargs: None),  # ParallelOperator.init_communication's HCCL start
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in replaced]
    comm = helper.GlobalComm
    saved_comm = (comm.INITED, comm.BACKEND, comm.WORLD_COMM_GROUP)
    try:
        for module, name, value in replaced:
            setattr(module, name, value)
        comm.INITED, comm.BACKEND, comm.WORLD_COMM_GROUP = True, helper.Backend("hccl"), helper.HCCL_WORLD_COMM_GROUP
        yield cluster
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        comm.INITED, comm.BACKEND, comm.WORLD_COMM_GROUP = saved_comm


__all__ = ["STOOD_IN", "cluster_standin"]
