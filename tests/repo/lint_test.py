#!/usr/bin/env python3
"""scripts/lint/lint.py: the real tree is clean, and each rule catches a planted violation
(and only that one) in a scratch tree built from nothing."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LINT = os.path.join(ROOT, "scripts", "lint", "lint.py")


def run(root, *flags, env=None):
    p = subprocess.run([sys.executable, LINT, "--root", root, *flags], capture_output=True, text=True,
                       timeout=120, env=env)
    return p.returncode, p.stdout, p.stderr


def clang_format_14():
    """True when this machine has clang-format 14 (the version the tree is formatted with)."""
    import shutil
    for name in ("clang-format-14", "clang-format"):
        path = shutil.which(name)
        if path and "version 14." in subprocess.run([path, "--version"], capture_output=True,
                                                      text=True).stdout:
            return True
    return False


def import_lint():
    """scripts/lint/lint.py as a module (no __pycache__ left in the tree)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("fracgpu_lint", LINT)
    module = importlib.util.module_from_spec(spec)
    sys.dont_write_bytecode, saved = True, sys.dont_write_bytecode
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


class Scratch:
    """A throw-away tree: write(rel, text) then lint it."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        os.makedirs(os.path.join(self.dir.name, "src"))

    def write(self, rel, text):
        path = os.path.join(self.dir.name, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def lint(self):
        """Layering and banned calls only (the format rule has tests of its own)."""
        return run(self.dir.name, "--no-format")

    def lint_format(self, env=None):
        return run(self.dir.name, env=env)

    def copy_style(self):
        with open(os.path.join(ROOT, ".clang-format")) as f:
            self.write(".clang-format", f.read())


class LintTest(unittest.TestCase):
    def scratch(self):
        t = Scratch()
        self.addCleanup(t.dir.cleanup)
        return t

    def test_the_repository_is_clean(self):
        if not clang_format_14():
            self.skipTest("clang-format 14 not installed (scripts/deps installs it)")
        rc, out, err = run(ROOT)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("format)", out)

    def test_a_misformatted_file_is_caught_at_its_first_differing_line(self):
        if not clang_format_14():
            self.skipTest("clang-format 14 not installed (scripts/deps installs it)")
        t = self.scratch()
        t.copy_style()
        t.write("src/core/a.cc", "int a = 1;\nint  b = 2 ;\nint   c;\n")
        t.write("tests/core/b_test.cc", "int a = 1;\n")
        t.write("bench/c.h", "#pragma once\nvoid F(int x,int y);\n")
        rc, out, _ = t.lint_format()
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip().splitlines(), [
            "bench/c.h:2: format: differs from .clang-format (first at this line); run clang-format -i bench/c.h",
            "src/core/a.cc:2: format: differs from .clang-format (first at this line); run clang-format -i src/core/a.cc",
        ])

    def test_another_clang_format_version_is_a_violation_not_a_pass(self):
        t = self.scratch()
        t.copy_style()
        t.write("src/core/a.cc", "int a = 1;\n")
        bin_dir = os.path.join(t.dir.name, "bin")
        os.makedirs(bin_dir)
        fake = os.path.join(bin_dir, "clang-format")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'Debian clang-format version 19.1.7'\n")
        os.chmod(fake, 0o755)
        rc, out, _ = t.lint_format(env={"PATH": bin_dir})
        self.assertEqual(rc, 1)
        self.assertIn(".clang-format:0: format: " + fake + " is 'Debian clang-format version 19.1.7', "
                      "not clang-format 14", out)
        rc, out, _ = run(t.dir.name, "--no-format", env={"PATH": bin_dir})
        self.assertEqual((rc, out.strip()), (0, "lint: clean (layering, banned calls)"))

    def test_a_tree_without_a_clang_format_file_is_a_violation(self):
        t = self.scratch()
        t.write("src/core/a.cc", "int a = 1;\n")
        rc, out, _ = t.lint_format()
        self.assertEqual(rc, 1)
        self.assertIn(".clang-format:0: format: the root has no .clang-format", out)

    def test_a_wrong_include_is_caught_with_file_line_and_the_allowed_set(self):
        t = self.scratch()
        t.write("src/core/fit.cc", '#include "core/fit.h"\n\n#include "k8s/client.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip(), "src/core/fit.cc:3: layering: 'core' includes \"k8s/...\"; it may include base")

    def test_base_includes_nothing_of_the_tree(self):
        t = self.scratch()
        t.write("src/base/strings.cc", '#include "base/strings.h"\n#include "core/fit.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip(), "src/base/strings.cc:2: layering: 'base' includes \"core/...\"; it may include nothing")

    def test_an_upward_include_from_an_adapter_is_caught(self):
        t = self.scratch()
        t.write("src/http/server.cc", '#include "scheduler/extender.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertIn("src/http/server.cc:1: layering: 'http' includes \"scheduler/...\"; it may include base, core", out)

    def test_allowed_includes_pass(self):
        t = self.scratch()
        t.write("src/scheduler/a.cc", '#include "core/fit.h"\n#include "http/server.h"\n#include "scheduler/a.h"\n')
        t.write("src/run/run.cc", '#include "vgpu/region.h"\n#include "enforce/proc.h"\n')
        self.assertEqual(t.lint()[0], 0)

    def test_libvgpu_includes_nothing_of_the_tree(self):
        t = self.scratch()
        t.write("src/vgpu/hooks.cc", '#include "core/status.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertIn("'vgpu' includes \"core/...\"", out)

    def test_an_unknown_component_is_reported(self):
        t = self.scratch()
        t.write("src/newthing/a.cc", '#include "core/fit.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertIn("component 'newthing' is not in the LAYERS table", out)

    def test_a_clock_in_core_is_caught_but_not_in_a_comment_or_a_string(self):
        t = self.scratch()
        t.write("src/core/a.cc", "// std::chrono::steady_clock is not for core\n"
                                 'const char* k = "steady_clock::now()";\n'
                                 "/* clock_gettime(\n */\n"
                                 "auto t = std::chrono::steady_clock::now();\n")
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        lines = out.strip().splitlines()
        self.assertEqual(lines, ["src/core/a.cc:5: banned: no clock in core: 'steady_clock'"])

    def test_threads_environment_and_files_in_core_are_caught(self):
        t = self.scratch()
        t.write("src/core/a.cc", "std::mutex m;\nconst char* h = getenv(\"HOME\");\nstd::ifstream in(p);\n")
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertIn("src/core/a.cc:1: banned: no threads in core", out)
        self.assertIn("src/core/a.cc:2: banned: no environment in core", out)
        self.assertIn("src/core/a.cc:3: banned: no files in core", out)

    def test_throw_only_in_command_front_ends(self):
        t = self.scratch()
        t.write("src/scheduler/command.cc", "void F() { throw CLI::RuntimeError(2); }\n")
        t.write("src/scheduler/state.cc", "void G() { throw 1; }\n")
        t.write("src/vgpu/limits.cc", "// must not throw\nvoid H() { abort(); }\n")
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertEqual(sorted(out.strip().splitlines()), [
            "src/scheduler/state.cc:1: banned: exceptions only in command front ends: 'throw'",
            "src/vgpu/limits.cc:2: banned: libvgpu.so never exits its host: 'abort('",
        ])

    def test_raw_strings_and_digit_separators_do_not_confuse_the_lexer(self):
        t = self.scratch()
        t.write("src/core/a.cc", 'auto s = R"js(throw "x"; getenv(")js";\nint n = 1\'000;\nint m = 2\'000;\n')
        self.assertEqual(t.lint()[0], 0)

    def test_the_node_plugins_are_siblings_over_node(self):
        # dra/ and deviceplugin/ never include each other; both include node/, which includes
        # neither (issue 35 item 3).
        t = self.scratch()
        t.write("src/dra/cdi.cc", '#include "node/container_edits.h"\n#include "deviceplugin/allocator.h"\n')
        t.write("src/deviceplugin/allocator.cc", '#include "node/config.h"\n#include "dra/cdi.h"\n')
        t.write("src/node/config.cc", '#include "nvml/gpu_source.h"\n#include "deviceplugin/server.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip().splitlines(), [
            "src/deviceplugin/allocator.cc:2: layering: 'deviceplugin' includes \"dra/...\"; it may include "
            "api, base, core, k8s, kubelet, node, nvml",
            "src/dra/cdi.cc:2: layering: 'dra' includes \"deviceplugin/...\"; it may include base, core, k8s, node, nvml",
            "src/node/config.cc:2: layering: 'node' includes \"deviceplugin/...\"; it may include api, base, core, nvml",
        ])

    def test_vgpu_includes_nothing_above_it(self):
        # Every file under src/vgpu/, in any subfolder, includes api/ only (`fracgpu run` and
        # `inspect` moved out to src/run/, issue 35 item 3); src/run/ may include vgpu/.
        t = self.scratch()
        t.write("src/vgpu/hooks.cc", '#include "api/region.h"\n#include "base/status.h"\n')
        t.write("src/vgpu/sub/x.cc", '#include "enforce/enforce.h"\n')
        t.write("src/vgpu/cli/run.cc", '#include "enforce/enforce.h"\n#include "base/status.h"\n')
        t.write("src/run/run.cc", '#include "enforce/enforce.h"\n#include "vgpu/region.h"\n')
        rc, out, _ = t.lint()
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip().splitlines(), [
            "src/vgpu/cli/run.cc:1: layering: 'vgpu' includes \"enforce/...\"; it may include api",
            "src/vgpu/cli/run.cc:2: layering: 'vgpu' includes \"base/...\"; it may include api",
            "src/vgpu/hooks.cc:2: layering: 'vgpu' includes \"base/...\"; it may include api",
            "src/vgpu/sub/x.cc:1: layering: 'vgpu' includes \"enforce/...\"; it may include api",
        ])

    def test_the_table_allows_only_components_below(self):
        lint = import_lint()
        self.assertEqual(lint.table_violations(), [])
        saved = dict(lint.LAYERS)
        try:
            lint.LAYERS["vgpu"] = {"api", "core"}  # core is listed above vgpu
            lint.LAYERS["node"] = lint.LAYERS["node"] | {"dra"}  # dra is listed above node
            self.assertEqual(sorted(v[3] for v in lint.table_violations()), [
                "LAYERS['node'] allows 'dra', which is not below it",
                "LAYERS['vgpu'] allows 'core', which is not below it",
            ])
        finally:
            lint.LAYERS.clear()
            lint.LAYERS.update(saved)

    def test_architecture_and_style_list_the_table(self):
        # docs/design/ARCHITECTURE.md's layer map names every LAYERS folder in the table's order,
        # and its include table says what LAYERS says; docs/design/STYLE.md names every folder.
        import re
        lint = import_lint()
        with open(os.path.join(ROOT, "docs/design/ARCHITECTURE.md"), encoding="utf-8") as f:
            arch = f.read()
        layers = arch[arch.index("## Layers"):]
        block = layers[layers.index("```") + 3:]
        block = block[:block.index("```")]
        named = []
        for m in re.finditer(r"(?<![\w/.])([a-z0-9_]+(?:/cli)?)/", block):
            if m.group(1) not in named:
                named.append(m.group(1))
        self.assertEqual(named, list(lint.LAYERS))
        rows = {}
        for m in re.finditer(r"^\| `([a-z0-9_/]+)/` \| ([^|]*) \|$", layers, re.M):
            deps = m.group(2).strip()
            rows[m.group(1)] = set() if deps == "nothing" else {d.strip() for d in deps.split(",")}
        self.assertEqual(rows, lint.LAYERS)
        with open(os.path.join(ROOT, "docs/design/STYLE.md"), encoding="utf-8") as f:
            style = f.read()
        for comp in lint.LAYERS:
            self.assertIn(f"src/{comp}/", style)

    def test_a_root_without_src_is_bad_usage(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _, err = run(d)
        self.assertEqual(rc, 2)
        self.assertIn("has no src/ folder", err)


if __name__ == "__main__":
    unittest.main()
