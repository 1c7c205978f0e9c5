// fracgpu: one executable, several subcommands (docs/design/ARCHITECTURE.md). Each component
// registers its own subcommand (fracgpu_add_command in CMake); this file only dispatches.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/heap.h"
#include "cli/usage.h"
#include "commands.inc"

namespace fracgpu::cli {
void RegisterKubeSchedulerManifestCommand(CLI::App& app);  // kube_scheduler_manifest.cc
}  // namespace fracgpu::cli

namespace {

// The subcommand list, one per line with its description, for the messages below.
std::string SubcommandList(CLI::App& app) {
  std::string out = "Subcommands:\n";
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    std::string name = sub->get_name();
    out += "  " + name + std::string(name.size() < 26 ? 26 - name.size() : 1, ' ') +
           sub->get_description() + "\n";
  }
  out += "Run 'fracgpu <subcommand> --help' for its flags and their defaults.\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fracgpu: fractional GPU sharing for Kubernetes with hard isolation"};
  app.require_subcommand(1);
  app.set_version_flag("--version", FRACGPU_VERSION);
  auto* version = app.add_subcommand("version", "Print the version");
  // The heap allocator too: the release build links jemalloc (FRACGPU_JEMALLOC), and an
  // operator comparing two builds' CPU should see which one each runs.
  version->callback([] {
    std::printf("fracgpu %s\nheap allocator: %s\n", FRACGPU_VERSION,
                fracgpu::base::HeapAllocatorName());
  });
  fracgpu::cli::RegisterAllCommands(app);
  fracgpu::cli::RegisterKubeSchedulerManifestCommand(app);
  // CLI11 alone says only "A subcommand is required" or "arguments were not expected": say
  // what is wrong and list what exists (exit 2, the status of every usage error; cli/usage.h).
  if (argc < 2) {
    std::fprintf(stderr, "fracgpu: a subcommand is required.\n\n%s", SubcommandList(app).c_str());
    return 2;
  }
  const std::string first = argv[1];
  std::string command;  // the subcommand being run, named in every error line
  if (!first.empty() && first[0] != '-') {
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->check_name(first)) command = sub->get_name();
    }
    if (command.empty()) {
      std::fprintf(stderr, "fracgpu: unknown subcommand \"%s\".\n\n%s", first.c_str(),
                   SubcommandList(app).c_str());
      return fracgpu::cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {
    return fracgpu::cli::ExitFor(app, command, e);
  }
  return 0;
}
