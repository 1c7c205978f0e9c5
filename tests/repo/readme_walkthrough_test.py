#!/usr/bin/env python3
"""README.md walked through as a new user would (issue 38 item 1).

Every command in README.md's ```sh blocks runs after the command the README says to run before
it: the first block is the two set-up commands; a block whose binaries live in build/<preset>/
is introduced by the command that builds that preset ("After `make demo`, ..."). The walk-through
runs `make demo` for real (after removing the binary it builds, so the examples can only pass
because `make demo` made it), then every example that uses that binary, exactly as written.
Commands that cannot run inside the suite are checked as far as they can be, and say why:
`make test` is this suite; `make bench` and `make fuzz` are resolved by make's dry run (their
prerequisites and recipes exist); the sandbox's commands are run by cli_sandbox_test (fake
cluster) and tests/realcluster/test_sandbox.py (real cluster), which this test checks.
A command in a ```sh block that this test does not know is a failure: add its check here.

Also: every build/<dir>/ that README.md or docs/ names is a CMake preset's build directory.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
README = os.path.join(ROOT, "README.md")


def presets():
    """Configure presets that make a build directory: name -> 'build/<name>'."""
    with open(os.path.join(ROOT, "CMakePresets.json")) as f:
        data = json.load(f)
    base_dir = {p["name"]: p.get("binaryDir") for p in data["configurePresets"]}
    out = {}
    for p in data["configurePresets"]:
        if p.get("hidden") or p["name"] == "base":
            continue
        d = p.get("binaryDir") or base_dir.get(p.get("inherits", ""), None)
        if d:
            out[p["name"]] = d.replace("${sourceDir}/", "").replace("${presetName}", p["name"])
    return out


# Which preset directories a README set-up command leaves built (Makefile: demo -> preset demo;
# test -> release, asan, tsan; sandbox -> release).
BUILDS = {"make demo": {"demo"}, "make test": {"release", "asan", "tsan"},
          "make sandbox": {"release"}}


def sh_blocks(text):
    """[(intro, [command, ...])]: each ```sh block with the paragraph just before it; commands
    without their trailing '# comment'."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            intro = []
            while j >= 0 and lines[j].strip() != "":
                intro.insert(0, lines[j])
                j -= 1
            cmds = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                c = re.sub(r"\s+#.*$", "", lines[i]).strip()
                if c:
                    cmds.append(c)
                i += 1
            out.append((" ".join(intro), cmds))
        i += 1
    return out


def readme_blocks():
    with open(README) as f:
        return sh_blocks(f.read())


def binary_preset(cmd):
    m = re.match(r"\./(build/[A-Za-z0-9_.-]+)/", cmd)
    if not m:
        return None
    for name, d in presets().items():
        if d == m.group(1):
            return name
    return "?" + m.group(1)


def kind(cmd):
    """How the walk-through checks `cmd`: run, self, dry-run, sandbox; None: unknown."""
    if cmd in ("make demo",):
        return "run"
    if cmd == "make test":
        return "self"
    if cmd in ("make bench", "make fuzz", "make sandbox"):
        return "dry-run"
    if re.fullmatch(r"bash scripts/sandbox\.sh --for \d+( --cluster fake)?", cmd):
        return "sandbox"
    if binary_preset(cmd) == "demo":
        return "run"  # run by the walk-through after `make demo`; other presets need a check here
    return None


def run(cmd, timeout):
    p = subprocess.run(shlex.split(cmd), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class ReadmeWalkthrough(unittest.TestCase):
    def test_the_first_block_is_the_two_set_up_commands(self):
        blocks = readme_blocks()
        self.assertTrue(blocks, "README.md has no ```sh block")
        self.assertEqual(blocks[0][1], ["make demo", "make test"])

    def test_every_command_has_a_check(self):
        unknown = [c for _, cmds in readme_blocks() for c in cmds if kind(c) is None]
        self.assertEqual(unknown, [], "README commands this walk-through does not check")

    def test_each_binary_is_built_by_the_command_said_before_it(self):
        for intro, cmds in readme_blocks()[1:]:
            said = {m for m in BUILDS if "`" + m + "`" in intro}
            built = set().union(*(BUILDS[m] for m in said)) if said else set()
            for c in cmds:
                p = binary_preset(c)
                if p is None:
                    continue
                self.assertFalse(p.startswith("?"), f"{c!r}: {p[1:]} is no preset's build directory")
                self.assertIn(p, built, f"{c!r} needs preset {p}, but the paragraph before it says "
                                        f"to run {sorted(said) or 'nothing'}: {intro!r}")

    def test_docs_name_only_preset_build_directories(self):
        dirs = set(presets().values())
        bad = []
        files = [README] + [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(ROOT, "docs"))
                            for f in fs if f.endswith(".md")]
        for path in files:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    for m in re.finditer(r"(?<![\w/$.-])(build/[A-Za-z0-9_-]+)(?=[/ `]|$)", line):
                        if m.group(1) not in dirs:
                            bad.append(f"{os.path.relpath(path, ROOT)}:{n}: {m.group(1)}")
        self.assertEqual(bad, [], "build directories no preset makes")

    def test_the_sandbox_commands_are_run_by_the_sandbox_tests(self):
        runners = {
            "cli_sandbox_test": os.path.join(ROOT, "tests", "cli", "sandbox_test.cc"),
            "test_sandbox.py": os.path.join(ROOT, "tests", "realcluster", "test_sandbox.py"),
        }
        text = {}
        for k, v in runners.items():
            with open(v) as f:
                text[k] = f.read()
        for _, cmds in readme_blocks():
            for c in cmds:
                if kind(c) != "sandbox":
                    continue
                fake = c.endswith("--cluster fake")
                name = "cli_sandbox_test" if fake else "test_sandbox.py"
                src = text[name]
                self.assertIn("scripts/sandbox.sh", src, name)
                self.assertRegex(src, r'"--for"', name)
                if fake:
                    self.assertRegex(src, r'"--cluster",\s*"fake"', name)
                else:
                    self.assertNotRegex(src, r'"--cluster",\s*"fake"', name)

    def test_make_targets_resolve(self):
        for _, cmds in readme_blocks():
            for c in cmds:
                if kind(c) != "dry-run":
                    continue
                target = c.split()[1]
                rc, out, err = run(f"make -n {target}", 120)
                self.assertEqual(rc, 0, f"make -n {target}: {err}")
                if target == "sandbox":
                    self.assertIn("bash scripts/sandbox.sh", out)
                if target == "fuzz":
                    self.assertIn("cmake --preset fuzz", out)

    def test_walkthrough_make_demo_then_its_examples(self):
        blocks = readme_blocks()
        demo_bin = os.path.join(ROOT, presets()["demo"], "fracgpu")
        if os.path.exists(demo_bin):
            os.remove(demo_bin)  # the examples may pass only because `make demo` built it
        rc, out, err = run("make demo", 1200)
        self.assertEqual(rc, 0, f"make demo failed:\n{out[-3000:]}\n{err[-3000:]}")
        # `make demo` prints simulate's table: the paper's policies beside fracgpu's.
        self.assertIn("FGD+CpuRoute", out)
        self.assertIn("BestFit", out)
        ran = 0
        for intro, cmds in blocks[1:]:
            if "`make demo`" not in intro:
                continue
            for c in cmds:
                if binary_preset(c) != "demo":
                    continue
                argv = shlex.split(c)
                out_dir = argv[argv.index("--out") + 1] if "--out" in argv else None
                if out_dir:
                    shutil.rmtree(out_dir, ignore_errors=True)
                rc, out, err = run(c, 600)
                self.assertEqual(rc, 0, f"{c}:\n{out[-2000:]}\n{err[-2000:]}")
                self.assertIn("FGD", out, c)
                if out_dir:
                    csvs = [f for f in os.listdir(out_dir) if f.endswith(".csv")]
                    self.assertTrue(csvs, f"{c}: no CSV in {out_dir}")
                ran += 1
        self.assertGreater(ran, 0, "no example after `make demo` was found to run")


def release_fracgpu():
    return os.environ.get("FRACGPU_BIN", os.path.join(ROOT, presets()["release"], "fracgpu"))


class GuidesTest(unittest.TestCase):
    """What the README promises about itself and the guides it points to."""

    def test_what_and_who_come_before_the_commands_and_times_after(self):
        with open(README) as f:
            text = f.read()
        first_block = text.index("```sh")
        intro = text[:first_block]
        self.assertRegex(intro, r"fracgpu shares NVIDIA GPUs")
        self.assertRegex(intro, r"[Ff]or platform engineers")
        after = text[first_block:text.index("###", first_block)]
        self.assertRegex(after, r"`make demo` about \d+ s")
        self.assertRegex(after, r"`make test` about \d+ minutes")
        sandbox = text[text.index("### Try it without a GPU or a cluster"):]
        sandbox = sandbox[:sandbox.index("```sh")]
        self.assertRegex(sandbox, r"about \d+ minutes", "the sandbox's time")

    def test_the_run_guide_documents_every_flag_of_fracgpu_run(self):
        # README points `fracgpu run` at docs/vgpu.md; its usage section names every flag that
        # `fracgpu run --help` lists.
        binary = release_fracgpu()
        self.assertTrue(os.path.exists(binary), f"{binary}: build the release preset first")
        p = subprocess.run([binary, "run", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        flags = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", p.stdout)) - {"--help"})
        self.assertGreater(len(flags), 5, p.stdout)
        with open(os.path.join(ROOT, "docs", "vgpu.md")) as f:
            doc = f.read()
        start = doc.index("## `fracgpu run` and `fracgpu inspect`")
        section = doc[start:doc.index("\n## ", start + 1)]
        missing = [f for f in flags if f"`{f}`" not in section]
        self.assertEqual(missing, [], "flags of `fracgpu run` the guide does not document")


class ParserTest(unittest.TestCase):
    """The block parser itself, on a made-up README."""

    def test_blocks_intros_and_comments(self):
        text = ("# t\n\n```sh\nmake demo   # a\nmake test\n```\n\nAfter `make demo`, this:\n\n"
                "```sh\n./build/demo/fracgpu simulate -q  # comment\n\n```\n```yaml\nx: 1\n```\n")
        self.assertEqual(sh_blocks(text), [("# t", ["make demo", "make test"]),
                                           ("After `make demo`, this:",
                                            ["./build/demo/fracgpu simulate -q"])])

    def test_unknown_and_unbuilt(self):
        self.assertIsNone(kind("curl http://x"))
        self.assertEqual(binary_preset("./build/e2e/fracgpu"), "?build/e2e")
        self.assertEqual(binary_preset("./build/release/fracgpu run"), "release")


if __name__ == "__main__":
    unittest.main(verbosity=2)
