// Command fake-cri is a CRI runtime for the real kubelet made from upstream's own fake remote
// runtime (k8s.io/cri-client/pkg/fake, which k8s.io/kubernetes' pkg/kubelet/cri/remote/fake moved
// to): pods "run" without containers. The one addition is a record of every CreateContainer
// request, written as protobuf JSON to <record-dir>/<namespace>_<pod>_<container>.json, so that
// tests can assert what the kubelet handed the runtime (env, mounts, devices, CDI devices,
// annotations) for a pod's container. One field is written as text whatever the proto says:
// config.envs[].value, a string in k8s.io/cri-api v0.34 and bytes (base64 in protobuf JSON) in
// v0.37, so that a record reads the same from every pinned release.
//
// Usage: fake-cri --listen unix:///path/cri.sock --record-dir DIR
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/cri-client/pkg/util"
)

// podIP is the address every pod sandbox reports (see main).
const podIP = "127.0.0.2"

// recorder is upstream's fake runtime with CreateContainer recorded before it is passed on.
type recorder struct {
	*fake.RemoteRuntime
	dir string
}

// CreateContainer writes the request (the container config and its sandbox config) to the
// record folder, then lets the upstream fake create the container.
func (r *recorder) CreateContainer(ctx context.Context, req *kubeapi.CreateContainerRequest) (*kubeapi.CreateContainerResponse, error) {
	md := req.GetSandboxConfig().GetMetadata()
	name := fmt.Sprintf("%s_%s_%s.json", md.GetNamespace(), md.GetName(), req.GetConfig().GetMetadata().GetName())
	body, err := record(req)
	if err != nil {
		return nil, fmt.Errorf("fake-cri: record %s: %w", name, err)
	}
	tmp := filepath.Join(r.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return nil, fmt.Errorf("fake-cri: record %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, name)); err != nil {
		return nil, fmt.Errorf("fake-cri: record %s: %w", name, err)
	}
	return r.RemoteRuntime.CreateContainer(ctx, req)
}

// record is req as indented protobuf JSON with config.envs[].value as text (see the file comment).
// string(v) holds for both types the field has had: string and []byte.
func record(req *kubeapi.CreateContainerRequest) ([]byte, error) {
	raw, err := protojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if cfg, ok := m["config"].(map[string]any); ok {
		envs := make([]any, 0, len(req.GetConfig().GetEnvs()))
		for _, kv := range req.GetConfig().GetEnvs() {
			envs = append(envs, map[string]any{"key": kv.GetKey(), "value": string(kv.GetValue())})
		}
		if len(envs) > 0 {
			cfg["envs"] = envs
		}
	}
	return json.MarshalIndent(m, "", "  ")
}

func main() {
	listen := flag.String("listen", "", "CRI endpoint to serve, unix:///path/to.sock")
	dir := flag.String("record-dir", "", "folder for the CreateContainer records")
	flag.Parse()
	if *listen == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "fake-cri: --listen and --record-dir are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "fake-cri: --record-dir %q: %v\n", *dir, err)
		os.Exit(1)
	}
	// Upstream's fake gives every sandbox the pod IP 192.168.192.168, and the kubelet then sends
	// the pods' HTTP probes there: a private address off this machine. There is no pod network
	// here, so every pod gets a loopback address instead, where a probe stays on the machine (and
	// fails, as nothing serves the pod's port).
	apitest.FakePodSandboxIPs = []string{podIP}
	rt := fake.NewFakeRemoteRuntime()
	// What upstream's Start does besides serving: the runtime and the network report ready.
	rt.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{Conditions: []*kubeapi.RuntimeCondition{
		{Type: kubeapi.RuntimeReady, Status: true},
		{Type: kubeapi.NetworkReady, Status: true},
	}}
	// Upstream's fake image service reports images of size 0 unless told otherwise, and the
	// kubelet refuses such an image ("Id or size of image ... is not set", ImageInspectError)
	// whenever it inspects one before starting a container (imagePullPolicy IfNotPresent). A
	// real runtime reports the image's size; 1 MiB stands in for it.
	rt.ImageService.SetFakeImageSize(1 << 20)
	rec := &recorder{RemoteRuntime: rt, dir: *dir}
	srv := grpc.NewServer()
	kubeapi.RegisterRuntimeServiceServer(srv, rec)
	kubeapi.RegisterImageServiceServer(srv, rec)
	l, err := util.CreateListener(*listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake-cri: --listen %q: %v\n", *listen, err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; srv.Stop(); os.Exit(0) }()
	if err := srv.Serve(l); err != nil {
		fmt.Fprintf(os.Stderr, "fake-cri: serve: %v\n", err)
		os.Exit(1)
	}
}
