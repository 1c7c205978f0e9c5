#pragma once
// Manifests as the API server stores them: YAML documents (deploy/'s files) read with yaml-cpp
// and turned into the JSON objects a client would GET, for tests that apply deploy/'s objects
// to the fake API server or check them against the code that reads them.

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fracgpu::fakes {

/// The YAML node as JSON, as the API server would store it: quoted scalars stay strings; plain
/// scalars become booleans, integers or null when they read as such (YAML 1.2 core schema).
nlohmann::json YamlToJson(const YAML::Node& node);

/// Every non-empty document of the YAML file `path` as JSON, in file order. Throws
/// YAML::Exception (YAML::BadFile when it cannot be read).
std::vector<nlohmann::json> LoadManifest(const std::string& path);

}  // namespace fracgpu::fakes
