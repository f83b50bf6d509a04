"""Cases for #7212 (open: the resource check asks the platform for its Ray resource), superseded by #7849 (merged).

``ResourcePoolManager._check_resource_available`` counts only ``GPU``/``NPU``, so a platform whose Ray resource has
another name (here ``XPU``) fails the check on verl 0.9.1 although the nodes have the devices, and a node short of
the platform's resource passes because another node has GPUs. #7212 makes the identical change our old 0006 made;
#7849 ("Ray resource discovery ... ask the active platform") supersedes it, and #6663 (open, per-node CPU check)
touches the same function. For their reviewers, in ``tests/single_controller/``.
"""

import pytest
import ray
from verl.single_controller.ray import base


class Platform:
    def __init__(self, resource_name: str):
        self.resource_name = resource_name

    def ray_resource_name(self) -> str:
        return self.resource_name


@pytest.fixture
def cluster(monkeypatch):
    """Two nodes as Ray reports their available resources, and the platform verl is running on."""

    def use(resources_per_node: dict, resource_name: str):
        monkeypatch.setattr(ray._private.state, "available_resources_per_node", lambda: resources_per_node)
        monkeypatch.setattr(base, "get_platform", lambda: Platform(resource_name))

    return use


def manager(gpus_per_node: list[int]) -> base.ResourcePoolManager:
    return base.ResourcePoolManager(resource_pool_spec={"global_pool": gpus_per_node}, mapping={})


def test_a_platform_resource_of_its_own_is_counted(cluster):
    cluster({"node-a": {"CPU": 8.0, "XPU": 2.0}, "node-b": {"CPU": 8.0, "XPU": 2.0}}, resource_name="XPU")
    manager([2, 2])._check_resource_available()


def test_too_few_of_the_platform_resource_still_fails(cluster):
    cluster({"node-a": {"CPU": 8.0, "XPU": 2.0}, "node-b": {"CPU": 8.0, "GPU": 8.0}}, resource_name="XPU")
    with pytest.raises(ValueError, match=r"Total available GPUs 2\.0 is less than total desired GPUs 4"):
        manager([2, 2])._check_resource_available()


@pytest.mark.parametrize("resource_name", ["GPU", "NPU"])
def test_gpu_and_npu_are_counted_as_before(cluster, resource_name):
    cluster({"node-a": {"CPU": 8.0, resource_name: 4.0}}, resource_name=resource_name)
    manager([4])._check_resource_available()
