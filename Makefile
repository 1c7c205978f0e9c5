# The README's two set-up commands. Both install what is missing first.
#   make demo  — builds and runs `fracgpu simulate` on the bundled Alibaba trace
#   make test  — builds and runs the whole suite, release and ASan+UBSan (and TSan: threaded suites)
.PHONY: demo test deps build-release build-asan build-tsan fuzz bench clean image sandbox test-k8s \
	test-k8s-oldest test-k8s-oldest-dra k8s-binaries helm-binary

deps:
	@bash scripts/install-deps.sh

build-release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release

build-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan

# ThreadSanitizer over the threaded suites only (the build preset lists their test targets).
build-tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan

# The demo builds only core + sim (preset demo, no tests) and installs only scripts/deps/demo.txt.
demo:
	@bash scripts/install-deps.sh --demo
	cmake --preset demo >/dev/null
	cmake --build --preset demo
	./build/demo/fracgpu simulate

test: build-release build-asan build-tsan helm-binary
	ctest --preset release -j2
	ctest --preset asan -j2
	ctest --preset tsan -j2
	$(MAKE) --no-print-directory test-k8s
	$(MAKE) --no-print-directory test-k8s-oldest-dra

# The real Kubernetes components of tests/realcluster/go.mod, built once into a cache outside the clone
# (scripts/k8s-build.sh; ~/.cache/fracgpu/k8s).
k8s-binaries: deps
	bash scripts/k8s-build.sh >/dev/null

# helm, built from its Go module (scripts/helm/go.mod) once into ~/.cache/fracgpu/helm
# (scripts/helm-build.sh; about 2 minutes on 2 cores the first time, then cached): the chart's
# ctest HelmChart.* and tests/realcluster/test_helm_install.py run it.
helm-binary: deps
	bash scripts/helm-build.sh >/dev/null

# The end-to-end suite on a local cluster of the real control plane and real kubelets
# (scripts/cluster.sh, docs/e2e.md "The real cluster"); closes on 'test-k8s: N passed, N failed'.
test-k8s: build-release k8s-binaries helm-binary
	python3 -m pytest tests/realcluster -q -p no:cacheprovider

# The same suite on the oldest Kubernetes minor fracgpu supports (not part of make test).
test-k8s-oldest: build-release helm-binary
	bash scripts/k8s-build.sh --version $(K8S_OLDEST) >/dev/null
	FRACGPU_K8S_VERSION=$(K8S_OLDEST) python3 -m pytest tests/realcluster -q -p no:cacheprovider
K8S_OLDEST ?= v1.34.4

# The DRA suite on the oldest minor too (part of make test; docs/dra.md's version table): the
# driver, the webhook's DRA mode and deploy/dra/ as shipped, with DRAConsumableCapacity on
# (alpha there) and off (its default there). Its binaries are cached beside the newest's.
test-k8s-oldest-dra: build-release
	bash scripts/k8s-build.sh --version $(K8S_OLDEST) >/dev/null
	FRACGPU_K8S_VERSION=$(K8S_OLDEST) python3 -m pytest tests/realcluster/test_dra.py \
	  tests/realcluster/test_dra_gate_off.py -q -p no:cacheprovider

# Not part of the README: coverage-guided fuzzing with clang's libFuzzer.
fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz

bench: build-release
	@rc=0; for b in build/release/bench/bench_*; do if [ -x "$$b" ]; then "$$b" || { echo "make bench: $$b failed" >&2; rc=1; }; fi; done; exit $$rc

clean:
	rm -rf build

# The fracgpu image (deploy/image/Dockerfile, BuildKit), for `kubectl apply -k deploy/`
# (docs/install.md). IMAGE=registry.example.com/fracgpu:0.1.0 make image; then docker push.
# Without docker, or with its daemon down, it says so and prints what to run (exit 2).
IMAGE ?= ghcr.io/fracgpu/fracgpu:0.1.0
image:
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "make image: docker is not installed here. On a machine with docker, from the repository root:" >&2; \
	  echo "  DOCKER_BUILDKIT=1 docker build -f deploy/image/Dockerfile -t $(IMAGE) ." >&2; \
	  echo "  docker push $(IMAGE)" >&2; \
	  echo "then set that image under images: in deploy/kustomization.yaml (docs/install.md)." >&2; \
	  exit 2; \
	elif ! docker info >/dev/null 2>&1; then \
	  echo "make image: docker is installed but its daemon does not answer (docker info failed)." >&2; \
	  echo "Start it (e.g. sudo systemctl start docker) or run on a machine where it runs:" >&2; \
	  echo "  DOCKER_BUILDKIT=1 docker build -f deploy/image/Dockerfile -t $(IMAGE) ." >&2; \
	  exit 2; \
	else \
	  echo "DOCKER_BUILDKIT=1 docker build -f deploy/image/Dockerfile -t $(IMAGE) ."; \
	  DOCKER_BUILDKIT=1 docker build -f deploy/image/Dockerfile -t $(IMAGE) . && \
	  echo "built $(IMAGE); next: docker push $(IMAGE), and set it under images: in deploy/kustomization.yaml"; \
	fi

# fracgpu without a GPU or a cluster (README): fake driver + NVML for `fracgpu run`, and a cluster
# + `fracgpu ui` on 127.0.0.1, where a notebook's pod gets its slice: as root with the real
# Kubernetes binaries (scripts/k8s-build.sh, which sandbox.sh runs) the local real cluster
# (scripts/cluster.sh), otherwise the fake one (fake-cluster of tests/e2e/), said in one line.
# Ctrl-C stops it.
sandbox: deps
	cmake --preset release >/dev/null
	cmake --build --preset release --target fracgpu vgpu fake_cuda fake_nvml vgpu_app vgpu_testpath fake-cluster
	bash scripts/sandbox.sh --build build/release
