// Fuzz target: the UI's form body decoder (POST /api/preview, /api/notebooks) and what is
// built from a decoded form (Notebook, its pod, YAML). Must never crash; a decoded form must
// always build a Notebook whose pod the core parser accepts or rejects without throwing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/request.h"
#include "ui/form.h"
#include "ui/yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  auto form = fracgpu::ui::DecodeNotebookForm(body);
  if (!form.ok()) {
    if (form.status().message().empty()) __builtin_trap();  // errors must say what is wrong
    return 0;
  }
  auto notebook = fracgpu::ui::BuildNotebook(*form);
  auto pod = fracgpu::ui::PodOfNotebook(notebook);
  auto parsed = fracgpu::core::ParsePodRequest(pod);
  (void)parsed;
  std::string yaml = fracgpu::ui::JsonToYaml(notebook);
  if (yaml.empty()) __builtin_trap();
  return 0;
}
