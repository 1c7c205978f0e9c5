#pragma once
// The notebook form: the JSON body the web page posts to /api/preview and /api/notebooks,
// its decoder, and the Kubeflow Notebook (kubeflow.org/v1) built from it. The GPU part of
// the form becomes container limits and Notebook annotations exactly as docs/design/CONTRACT.md §1
// names them; Kubeflow's notebook controller copies the Notebook's annotations to the pod
// (except keys containing "kubectl" or "notebook") and uses spec.template.spec as the pod spec.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/request.h"

namespace fracgpu::ui {

/// How the user slices each GPU.
enum class SliceMode {
  kWhole,     ///< whole, exclusive cards: only nvidia.com/gpu
  kFraction,  ///< a fraction of the card: memory % and cores % (¼ ½ ¾ or custom)
  kMemory,    ///< a memory amount (MiB or GiB), optional cores %
  kCores,     ///< a cores %, optional memory MiB
};

/// The decoded form. Numbers are kept as the user typed them (not range-checked here): the
/// core request parser checks them on the generated pod, so messages equal the webhook's.
struct NotebookForm {
  std::string name;
  std::string namespace_name;
  std::string image;
  std::string cpu;     ///< Kubernetes quantity, e.g. "1" or "500m"; empty = not set
  std::string memory;  ///< Kubernetes quantity, e.g. "2Gi"; empty = not set
  int64_t gpus = 0;    ///< nvidia.com/gpu; 0 = no GPU section
  SliceMode mode = SliceMode::kWhole;
  std::optional<int64_t> memory_percent;  ///< kFraction: nvidia.com/gpumem-percentage
  std::optional<int64_t> memory_mib;      ///< kMemory / kCores: nvidia.com/gpumem (MiB)
  std::optional<int64_t> cores_percent;   ///< nvidia.com/gpucores (%)
  std::string node_policy;  ///< hami.io/node-scheduler-policy value; empty = cluster default
  std::string gpu_policy;   ///< hami.io/gpu-scheduler-policy value; empty = cluster default
  std::vector<std::string> use_uuids, nouse_uuids, use_types, nouse_types;
};

/// Decodes the form body (a JSON object; see docs/ui.md for the schema):
///   {"name","namespace","image","cpu","memory": strings; "gpus": integer;
///    "slice": {"mode": "whole"|"fraction"|"memory"|"cores",
///              "memory_percent", "cores_percent": integers (fraction),
///              "memory_value": number, "memory_unit": "MiB"|"GiB" (memory; cores optional memory),
///              "cores_percent": integer (cores; optional in memory)};
///    "node_policy","gpu_policy": strings; "use_uuids","nouse_uuids","use_types","nouse_types":
///    arrays of strings}.
/// Absent or null fields take their defaults. GiB values are converted to MiB (× 1024) and
/// must then be a whole number of MiB.
/// Errors: kInvalidArgument naming the field and the value for malformed JSON, a wrong JSON
/// type, an unknown mode or unit, a fractional value where an integer is needed; then every
/// error of NotebookFormErrors at once, joined with "; ". Out-of-range
/// numbers (negative, cores 150) are kept, so that the core parser reports them with the webhook's
/// message. Never throws.
Result<NotebookForm> DecodeNotebookForm(const std::string& body);

/// The longest notebook name: Kubeflow's notebook controller runs the notebook as a StatefulSet
/// of the same name, whose pods get the label controller-revision-hash "<name>-<10-char hash>",
/// and a label value is at most 63 characters (kubernetes/kubernetes issue 64023).
inline constexpr size_t kMaxNotebookNameLength = 52;

/// True when `s` can name a Kubeflow Notebook: a DNS-1123 label that starts with a letter (the
/// controller also makes a Service of the same name, and Service names are DNS-1035 labels) and
/// is at most kMaxNotebookNameLength characters.
bool IsNotebookName(const std::string& s);

/// Every field error of a decoded form, each naming the field and quoting its value, in field
/// order: name (IsNotebookName), namespace (a DNS-1123 label), image (required), cpu and memory
/// (when set: a Kubernetes quantity by core::ParseQuantity's grammar of
/// k8s.io/apimachinery resource.Quantity, not negative; "lots" and "2 GB" are refused, "500m",
/// "2", "2Gi", "1.5G" accepted). Empty when the form is valid. The web page (web/form.js) checks
/// the same rules before it asks the server.
std::vector<std::string> NotebookFormErrors(const NotebookForm& form);

/// True when `s` is a DNS-1123 label (RFC 1123: 1–63 of [a-z0-9-], not starting or ending
/// with '-'), as Kubernetes requires of namespace and notebook names.
bool IsDnsLabel(const std::string& s);

/// Names and defaults for building the Notebook.
struct NotebookOptions {
  core::ResourceNames names;  ///< GPU resource names (cluster-configurable)
};

/// The Notebook (kubeflow.org/v1) for `form`: metadata.name/namespace, labels {app: name},
/// annotations for the type/UUID lists and policies (comma-joined, docs/design/CONTRACT.md §1);
/// spec.template.spec a pod spec with one container named after the notebook, its image,
/// CPU/memory requests and limits, and the GPU limits (strings, whole numbers):
/// whole → gpu; fraction → gpu, gpumem-percentage, gpucores; memory → gpu, gpumem
/// [, gpucores]; cores → gpu, gpucores [, gpumem]. No GPU keys when gpus is 0 and the slice
/// mode is whole.
nlohmann::json BuildNotebook(const NotebookForm& form, const NotebookOptions& options = {});

/// The pod the notebook controller will make from `notebook` (for validation and fit):
/// metadata name/namespace/annotations (without keys containing "kubectl" or "notebook",
/// as the controller filters them) and spec = spec.template.spec.
nlohmann::json PodOfNotebook(const nlohmann::json& notebook);

}  // namespace fracgpu::ui
