"""What the local cluster's fake CRI runtime recorded (tests/realcluster/cmd/fake-cri): one JSON
file per container, <state>/nodes/<node>/records/<namespace>_<pod>_<container>.json, holding the
kubelet's CreateContainerRequest as protobuf JSON with config.envs[].value as text."""

import json
from pathlib import Path


def read_record(state_dir, node, namespace, pod, container):
    """The CreateContainerRequest the node's runtime received for that container, parsed; None
    while there is none."""
    f = Path(state_dir) / "nodes" / node / "records" / f"{namespace}_{pod}_{container}.json"
    return json.loads(f.read_text()) if f.exists() else None


def container_env(record):
    """The container's environment from a record: {name: value}."""
    return {e["key"]: e.get("value", "") for e in record["config"].get("envs", [])}
