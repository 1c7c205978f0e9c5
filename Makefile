# The README's two set-up commands. Both install what is missing first.
#   make demo  — builds and runs `fracgpu simulate` on the bundled Alibaba trace
#   make test  — builds and runs the whole suite, release and ASan+UBSan
.PHONY: demo test deps build-release build-asan fuzz bench clean

deps:
	@bash scripts/install-deps.sh

build-release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release

build-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan

# The demo builds only core + sim (preset demo, no tests) and installs only scripts/deps/demo.txt.
demo:
	@bash scripts/install-deps.sh --demo
	cmake --preset demo >/dev/null
	cmake --build --preset demo
	./build/demo/fracgpu simulate

test: build-release build-asan
	ctest --preset release -j2
	ctest --preset asan -j2

# Not part of the README: coverage-guided fuzzing with clang's libFuzzer.
fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz

bench: build-release
	@for b in build/release/bench/bench_*; do [ -x "$$b" ] && "$$b"; done

clean:
	rm -rf build
