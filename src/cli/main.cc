// fracgpu: one executable, several subcommands (ARCHITECTURE.md). Each component registers
// its own subcommand (fracgpu_add_command in CMake); this file only dispatches.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.inc"

int main(int argc, char** argv) {
  CLI::App app{"fracgpu: fractional GPU sharing for Kubernetes with hard isolation"};
  app.require_subcommand(1);
  app.set_version_flag("--version", FRACGPU_VERSION);
  auto* version = app.add_subcommand("version", "Print the version");
  version->callback([] { std::printf("fracgpu %s\n", FRACGPU_VERSION); });
  fracgpu::cli::RegisterAllCommands(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
