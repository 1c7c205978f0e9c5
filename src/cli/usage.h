// One convention for the errors of every `fracgpu` subcommand (docs/development.md "The command
// line"), shared by main.cc and the tests that drive a subcommand through its own CLI::App:
//   - a usage error (an unknown flag, a bad value, a missing or conflicting flag) prints
//     `fracgpu <command>: <message>` on stderr and exits 2, before the command connects to
//     anything; a command reports its own checks by throwing CLI::ValidationError(message);
//   - a runtime failure (cannot connect, cannot write) is printed by the command itself, with
//     the same prefix where it is not a daemon's log line, and exits with its own status (not 2)
//     through CLI::RuntimeError(status);
//   - --help and --version print to stdout and exit 0.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace fracgpu::cli {

/// The exit status of every usage error.
inline constexpr int kExitUsage = 2;

/// "fracgpu <command>: " ("fracgpu: " without a command): the start of every error line.
inline std::string ErrorPrefix(const std::string& command) {
  return command.empty() ? "fracgpu: " : "fracgpu " + command + ": ";
}

/// What main() prints and returns for an exception out of CLI::App::parse of `app` while it ran
/// `command` (the subcommand's name; "" before one was named).
inline int ExitFor(CLI::App& app, const std::string& command, const CLI::Error& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  if (dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) {
    return e.get_exit_code();  // the command has said why
  }
  std::fprintf(stderr, "%s%s\n", ErrorPrefix(command).c_str(), e.what());
  return kExitUsage;
}

}  // namespace fracgpu::cli
