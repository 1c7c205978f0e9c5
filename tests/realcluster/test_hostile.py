"""Issue 33 on the real cluster: fracgpu's scheduler accepts /bind, /filter, /prioritize and
/webhook only from the API server and kube-scheduler (client certificates of fracgpu's own client
CA, docs/scheduler.md "Authentication"). An unauthenticated /bind of a pending pod is refused and
the pod stays pending; a certificate of the cluster's own CA (which every kubelet holds) is not
enough; /metrics on the main port needs one too; the normal flow (the API server calling the
webhook, kube-scheduler calling the extender, each with its certificate) still schedules."""

import json
import socket
import ssl
import time
import urllib.error
import urllib.request

import yaml


def extender_url(cluster):
    """The extender's https://127.0.0.1:PORT, as scripts/cluster.sh gave kube-scheduler."""
    cfg = yaml.safe_load((cluster.dir / "fracgpu" / "kube-scheduler-config.yaml").read_text())
    return cfg["extenders"][0]["urlPrefix"]


def call(url, body=None, cert=None):
    """(status, body) of a request to fracgpu's scheduler, with the client certificate `cert`
    ((crt, key) paths) or none; (None, reason) when the TLS handshake is refused."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(*cert)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ssl.SSLError, ConnectionError, socket.timeout) as e:
        return None, str(e)


def pod(name, scheduler=None, mem=None, node_selector=None):
    spec = {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}
    if mem:
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1,
                                                         "nvidia.com/gpumem": mem}}
    if scheduler:
        spec["schedulerName"] = scheduler
    if node_selector:
        spec["nodeSelector"] = node_selector
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default",
                                    "labels": {"test": "hostile"}},
                       "spec": spec})


def test_unauthenticated_bind_is_refused_and_the_pod_stays_pending(cluster):
    url = extender_url(cluster)
    node = cluster.get("nodes")["items"][0]["metadata"]["name"]
    cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=hostile", "--wait=true")
    try:
        # Pending for good: a pod of the default scheduler that no node's labels match, and a
        # fracgpu pod larger than any GPU.
        cluster.apply(pod("hostile-other", node_selector={"no-such-label": "x"}))
        biggest = max(m for n in cluster.get("nodes")["items"]
                      for _, m in cluster.node_gpus(n["metadata"]["name"]))
        cluster.apply(pod("hostile-big", mem=biggest + 1))
        for name in ("hostile-other", "hostile-big"):
            p = cluster.wait(f"{name} created", lambda: cluster.get("-n", "default", "pod", name))
            args = {"PodName": name, "PodNamespace": "default", "PodUID": p["metadata"]["uid"],
                    "Node": node}
            status, body = call(f"{url}/bind", args)
            assert status == 401, (name, status, body)
            assert "client certificate" in body, body
            # A certificate of the cluster's CA (here the admin's, system:masters) is not one of
            # fracgpu's client CA: the handshake fails.
            admin = (str(cluster.dir / "pki" / "admin.crt"), str(cluster.dir / "pki" / "admin.key"))
            status, body = call(f"{url}/bind", args, cert=admin)
            assert status is None or status in (401, 403), (name, status, body)
            for path in ("/filter", "/prioritize"):
                status, body = call(f"{url}{path}", {"Pod": p, "NodeNames": [node]})
                assert status == 401, (path, status, body)
        time.sleep(2)  # room for a bind that was wrongly let through to land
        for name in ("hostile-other", "hostile-big"):
            p = cluster.get("-n", "default", "pod", name)
            assert not p["spec"].get("nodeName"), p["spec"]
            assert p["status"].get("phase") == "Pending", p["status"]
            ann = p["metadata"].get("annotations", {})
            assert "hami.io/vgpu-devices-allocated" not in ann, ann
        # /metrics (which names every pod holding a slice) needs a certificate on this port too.
        status, _ = call(f"{url}/metrics")
        assert status == 401, status
        # kube-scheduler's certificate is accepted.
        ks = (str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.crt"),
              str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.key"))
        status, body = call(f"{url}/metrics", cert=ks)
        assert status == 200, (status, body[:200])

        # The normal flow: the API server calls the webhook (which sets schedulerName) and
        # kube-scheduler the extender, each with its certificate; the pod runs.
        cluster.apply(pod("hostile-normal", mem=1000))
        p = cluster.wait("hostile-normal Running", lambda: cluster.running("default", "hostile-normal"),
                         timeout=120)
        assert p["spec"]["schedulerName"] == "fracgpu-scheduler"
        assert p["metadata"]["annotations"].get("hami.io/vgpu-devices-allocated"), p["metadata"]
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=hostile", "--wait=false")
