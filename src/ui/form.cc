#include "ui/form.h"

#include <cmath>
#include <limits>

#include "base/strings.h"
#include "core/codec_json.h"
#include "core/quantity.h"

namespace fracgpu::ui {
namespace {

using nlohmann::json;

std::string Shown(const json& v) { return v.dump(); }

// Reads an optional string field; absent/null → "".
Status ReadString(const json& obj, const char* key, const std::string& where, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string())
    return InvalidArgument(where + key + " must be a string, got " + Shown(*it));
  *out = it->get<std::string>();
  return Status::Ok();
}

// Reads an optional integer field (a JSON integer, or a float with no fractional part).
Status ReadInt(const json& obj, const char* key, const std::string& where,
               std::optional<int64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(where + key + " is too large, got " + Shown(*it));
    }
    *out = it->get<int64_t>();
    return Status::Ok();
  }
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      return InvalidArgument(where + key + " must be a whole number, got " + Shown(*it));
    }
    *out = static_cast<int64_t>(d);
    return Status::Ok();
  }
  return InvalidArgument(where + key + " must be an integer, got " + Shown(*it));
}

Status ReadList(const json& obj, const char* key, std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array())
    return InvalidArgument(std::string(key) + " must be an array of strings, got " + Shown(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    if (!e.is_string()) {
      return InvalidArgument(std::string(key) + "[" + std::to_string(i) +
                             "] must be a string, got " + Shown(e));
    }
    std::string v = e.get<std::string>();
    if (v.find(',') != std::string::npos) {
      return InvalidArgument(std::string(key) + "[" + std::to_string(i) +
                             "] must not contain a comma, got " + Shown(e));
    }
    if (!v.empty()) out->push_back(std::move(v));
  }
  return Status::Ok();
}

Status DecodeSlice(const json& slice, NotebookForm* form) {
  if (!slice.is_object()) return InvalidArgument("slice must be an object, got " + Shown(slice));
  std::string mode = "whole";
  FRACGPU_RETURN_IF_ERROR(ReadString(slice, "mode", "slice.", &mode));
  if (mode == "whole" || mode.empty()) {
    form->mode = SliceMode::kWhole;
    return Status::Ok();
  }
  if (mode == "fraction") {
    form->mode = SliceMode::kFraction;
    FRACGPU_RETURN_IF_ERROR(ReadInt(slice, "memory_percent", "slice.", &form->memory_percent));
    FRACGPU_RETURN_IF_ERROR(ReadInt(slice, "cores_percent", "slice.", &form->cores_percent));
    if (!form->memory_percent)
      return InvalidArgument("slice.memory_percent is required in fraction mode");
    return Status::Ok();
  }
  if (mode != "memory" && mode != "cores") {
    return InvalidArgument("slice.mode must be one of whole, fraction, memory, cores, got \"" +
                           mode + "\"");
  }
  form->mode = mode == "memory" ? SliceMode::kMemory : SliceMode::kCores;
  FRACGPU_RETURN_IF_ERROR(ReadInt(slice, "cores_percent", "slice.", &form->cores_percent));
  std::string unit = "MiB";
  FRACGPU_RETURN_IF_ERROR(ReadString(slice, "memory_unit", "slice.", &unit));
  if (unit != "MiB" && unit != "GiB") {
    return InvalidArgument("slice.memory_unit must be MiB or GiB, got \"" + unit + "\"");
  }
  auto it = slice.find("memory_value");
  if (it != slice.end() && !it->is_null()) {
    if (!it->is_number())
      return InvalidArgument("slice.memory_value must be a number, got " + Shown(*it));
    double v = it->get<double>();
    double mib = unit == "GiB" ? v * 1024.0 : v;
    if (!std::isfinite(mib) || mib != std::floor(mib) || std::fabs(mib) > 9.0e15) {
      return InvalidArgument("slice.memory_value " + Shown(*it) + " " + unit +
                             " is not a whole number of MiB");
    }
    form->memory_mib = static_cast<int64_t>(mib);
  }
  if (form->mode == SliceMode::kMemory && !form->memory_mib) {
    return InvalidArgument("slice.memory_value is required in memory mode");
  }
  if (form->mode == SliceMode::kCores && !form->cores_percent) {
    return InvalidArgument("slice.cores_percent is required in cores mode");
  }
  return Status::Ok();
}

}  // namespace

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

bool IsNotebookName(const std::string& s) {
  return IsDnsLabel(s) && s.size() <= kMaxNotebookNameLength && s.front() >= 'a' &&
         s.front() <= 'z';
}

namespace {

// The error for a cpu or memory value that is not a non-negative Kubernetes quantity; "" if ok.
std::string QuantityError(const char* field, const std::string& value) {
  // Shown quoted and cut: the value is whatever the client sent.
  const std::string shown = "\"" + value.substr(0, 40) + (value.size() > 40 ? "…" : "") + "\"";
  auto q = core::ParseQuantity(value);
  if (!q.ok()) {
    return std::string(field) +
           " must be a Kubernetes quantity (a number with an optional suffix m, k, M, G, T, P, "
           "E, Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>, no spaces; e.g. " +
           (std::string(field) == "cpu" ? "500m or 2" : "2Gi or 1.5G") + "), got " + shown;
  }
  if (q->negative) return std::string(field) + " must not be negative, got " + shown;
  return "";
}

}  // namespace

std::vector<std::string> NotebookFormErrors(const NotebookForm& form) {
  std::vector<std::string> errors;
  if (form.name.empty()) {
    errors.push_back("name is required");
  } else if (!IsNotebookName(form.name)) {
    errors.push_back(
        "name must start with a lower-case letter and hold only lower-case letters, digits and "
        "'-', not end with '-', at most 52 characters (Kubeflow names the notebook's Service and "
        "StatefulSet after it), got \"" +
        form.name.substr(0, 80) + "\"");
  }
  if (form.namespace_name.empty()) {
    errors.push_back("namespace is required");
  } else if (!IsDnsLabel(form.namespace_name)) {
    errors.push_back(
        "namespace must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got "
        "\"" +
        form.namespace_name.substr(0, 80) + "\"");
  }
  if (form.image.empty()) errors.push_back("image is required");
  if (!form.cpu.empty()) {
    if (std::string e = QuantityError("cpu", form.cpu); !e.empty()) errors.push_back(e);
  }
  if (!form.memory.empty()) {
    if (std::string e = QuantityError("memory", form.memory); !e.empty()) errors.push_back(e);
  }
  return errors;
}

Result<NotebookForm> DecodeNotebookForm(const std::string& body) {
  // Depth-bounded (core/codec_json.h): Shown() below dumps values, which recurses (issue 15).
  auto parsed = core::ParseJsonBounded(body, "request body");
  if (!parsed.ok()) {
    return parsed.status().message().find("nests") != std::string::npos
               ? parsed.status()
               : InvalidArgument("request body is not valid JSON");
  }
  json doc = std::move(*parsed);
  if (!doc.is_object())
    return InvalidArgument("request body must be a JSON object, got " + Shown(doc).substr(0, 80));
  NotebookForm form;
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "name", "", &form.name));
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "namespace", "", &form.namespace_name));
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "image", "", &form.image));
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "cpu", "", &form.cpu));
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "memory", "", &form.memory));
  std::optional<int64_t> gpus;
  FRACGPU_RETURN_IF_ERROR(ReadInt(doc, "gpus", "", &gpus));
  form.gpus = gpus.value_or(0);
  if (auto it = doc.find("slice"); it != doc.end() && !it->is_null()) {
    FRACGPU_RETURN_IF_ERROR(DecodeSlice(*it, &form));
  }
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "node_policy", "", &form.node_policy));
  FRACGPU_RETURN_IF_ERROR(ReadString(doc, "gpu_policy", "", &form.gpu_policy));
  FRACGPU_RETURN_IF_ERROR(ReadList(doc, "use_uuids", &form.use_uuids));
  FRACGPU_RETURN_IF_ERROR(ReadList(doc, "nouse_uuids", &form.nouse_uuids));
  FRACGPU_RETURN_IF_ERROR(ReadList(doc, "use_types", &form.use_types));
  FRACGPU_RETURN_IF_ERROR(ReadList(doc, "nouse_types", &form.nouse_types));
  std::vector<std::string> errors = NotebookFormErrors(form);
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors) joined += (joined.empty() ? "" : "; ") + e;
    return InvalidArgument(joined);
  }
  return form;
}

json BuildNotebook(const NotebookForm& form, const NotebookOptions& options) {
  const core::ResourceNames& n = options.names;
  json limits = json::object();
  json requests = json::object();
  if (!form.cpu.empty()) requests["cpu"] = limits["cpu"] = form.cpu;
  if (!form.memory.empty()) requests["memory"] = limits["memory"] = form.memory;
  bool gpu_section = form.gpus != 0 || form.mode != SliceMode::kWhole;
  if (gpu_section) {
    limits[n.gpu] = std::to_string(form.gpus);
    switch (form.mode) {
      case SliceMode::kWhole:
        break;
      case SliceMode::kFraction:
        if (form.memory_percent) limits[n.gpumem_percentage] = std::to_string(*form.memory_percent);
        if (form.cores_percent) limits[n.gpucores] = std::to_string(*form.cores_percent);
        break;
      case SliceMode::kMemory:
      case SliceMode::kCores:
        if (form.memory_mib) limits[n.gpumem] = std::to_string(*form.memory_mib);
        if (form.cores_percent) limits[n.gpucores] = std::to_string(*form.cores_percent);
        break;
    }
  }
  json annotations = json::object();
  if (!form.use_types.empty())
    annotations[core::kAnnotationUseGpuType] = base::Join(form.use_types, ",");
  if (!form.nouse_types.empty())
    annotations[core::kAnnotationNoUseGpuType] = base::Join(form.nouse_types, ",");
  if (!form.use_uuids.empty())
    annotations[core::kAnnotationUseGpuUuid] = base::Join(form.use_uuids, ",");
  if (!form.nouse_uuids.empty())
    annotations[core::kAnnotationNoUseGpuUuid] = base::Join(form.nouse_uuids, ",");
  if (!form.node_policy.empty()) annotations[core::kAnnotationNodePolicy] = form.node_policy;
  if (!form.gpu_policy.empty()) annotations[core::kAnnotationGpuPolicy] = form.gpu_policy;

  json container = {{"name", form.name}, {"image", form.image}};
  json resources = json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  container["resources"] = resources;
  json metadata = {
      {"name", form.name}, {"namespace", form.namespace_name}, {"labels", {{"app", form.name}}}};
  if (!annotations.empty()) metadata["annotations"] = annotations;
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "Notebook"},
          {"metadata", metadata},
          {"spec", {{"template", {{"spec", {{"containers", json::array({container})}}}}}}}};
}

json PodOfNotebook(const json& notebook) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", json::object()},
              {"spec", json::object()}};
  const json md = notebook.value("metadata", json::object());
  if (md.is_object()) {
    if (md.contains("name")) pod["metadata"]["name"] = md["name"];
    if (md.contains("namespace")) pod["metadata"]["namespace"] = md["namespace"];
    if (md.contains("annotations") && md["annotations"].is_object()) {
      json copied = json::object();
      for (const auto& [k, v] : md["annotations"].items()) {
        if (k.find("kubectl") == std::string::npos && k.find("notebook") == std::string::npos)
          copied[k] = v;
      }
      pod["metadata"]["annotations"] = copied;
    }
  }
  const json* spec = nullptr;
  if (notebook.contains("spec") && notebook["spec"].is_object() &&
      notebook["spec"].contains("template") && notebook["spec"]["template"].is_object() &&
      notebook["spec"]["template"].contains("spec")) {
    spec = &notebook["spec"]["template"]["spec"];
  }
  if (spec != nullptr && spec->is_object()) pod["spec"] = *spec;
  return pod;
}

}  // namespace fracgpu::ui
