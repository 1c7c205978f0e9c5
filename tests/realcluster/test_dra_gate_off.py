"""fracgpu's DRA driver on a cluster that does not serve consumable capacity (KEP-5075): the
DRAConsumableCapacity feature gate off on every component, as 1.34–1.35 ship by default. The API
server then drops allowMultipleAllocations and requestPolicy from slices (and capacity from
claims) without an error; the driver must notice at start-up, say so, and publish whole GPUs
(docs/dra.md "Kubernetes versions and feature gates"), with deploy/'s
`--consumable-capacity=auto` unchanged."""

import time

from conftest import DRA_SLICE_INTERVAL
from test_dra import (DRIVER, MI, apply_all, check_prepared, claim, claim_pod, delete, node_names,
                      quantity, slice_of)


def test_driver_detects_dropped_fields_and_publishes_whole_gpus(dra_gate_off_cluster):
    c = dra_gate_off_cluster
    gens = {}
    for node in node_names(c):
        log = c.dir / "logs" / f"dra-driver-{node}.log"
        c.wait(f"{node}: the driver says consumable capacity is not served",
               lambda: "does not serve consumable capacity" in log.read_text(errors="replace"), 30)
        text = log.read_text(errors="replace")
        assert "allowMultipleAllocations" in text and "publishing whole GPUs instead" in text, text[-2000:]
        s = slice_of(c, node)
        assert s is not None
        gpus = dict(c.node_gpus(node))
        for d in s["spec"]["devices"]:
            assert "allowMultipleAllocations" not in d, d
            assert "requestPolicy" not in d["capacity"]["memory"], d
            assert quantity(d["capacity"]["memory"]["value"]) == gpus[d["attributes"]["uuid"]["string"]] * MI
        # Once whole, the slice stays as written: no rewrite on every sync.
        gens[node] = s["spec"]["pool"]["generation"]
    time.sleep(3 * DRA_SLICE_INTERVAL)
    for node in node_names(c):
        gen = gens[node]
        assert slice_of(c, node)["spec"]["pool"]["generation"] == gen


def test_claim_for_a_share_loses_its_capacity_at_the_api_server(dra_gate_off_cluster):
    """What a user sees on such a cluster: the API server strips the claim's capacity request
    (pkg/api/resourceclaimspec dropDisabledDRAResourceClaimConsumableCapacityFields), so the claim
    asks for, and gets, a whole GPU; the driver prepares the whole card with its limits."""
    c = dra_gate_off_cluster
    rc = claim("gate-off", [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.fracgpu.io",
        "capacity": {"requests": {"memory": "3000Mi", "cores": "30"}}}}])
    apply_all(c, rc, claim_pod("gate-off", {"g": "gate-off"}))
    try:
        stored = c.get("-n", "default", "resourceclaim", "gate-off")
        assert "capacity" not in stored["spec"]["devices"]["requests"][0]["exactly"], stored["spec"]
        pod = c.wait("gate-off Running", lambda: c.running("default", "gate-off"), 90)
        got = c.get("-n", "default", "resourceclaim", "gate-off")
        [r] = got["status"]["allocation"]["devices"]["results"]
        assert r["driver"] == DRIVER and "consumedCapacity" not in r and not r.get("shareID")
        [(_, _, mib, cores)] = check_prepared(c, pod, got)
        assert cores == 100
        assert mib == dict(c.node_gpus(pod["spec"]["nodeName"]))[
            slice_device_uuid(c, pod["spec"]["nodeName"], r["device"])]
    finally:
        delete(c, ("pod", "gate-off"), ("resourceclaim", "gate-off"))


def slice_device_uuid(c, node, device):
    return next(d["attributes"]["uuid"]["string"] for d in slice_of(c, node)["spec"]["devices"]
                if d["name"] == device)
