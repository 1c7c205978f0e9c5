#include "scheduler/extender_args.h"

#include <cctype>
#include <map>
#include <string_view>
#include <utility>

#include "core/codec_json.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

Result<json> ParseObject(const std::string& body, const char* what) {
  auto parsed = core::ParseJsonBounded(body, std::string(what) + " body");
  if (!parsed.ok()) return parsed.status();
  json j = std::move(*parsed);
  if (!j.is_object())
    return InvalidArgument(std::string(what) + " must be a JSON object, got " + j.type_name());
  return j;
}

// The member of `obj` FindKeyIgnoringCase would return, as an iterator (end() when absent).
json::iterator FindIgnoringCase(json& obj, const std::string& key) {
  auto exact = obj.find(key);
  if (exact != obj.end()) return exact;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (IEquals(it.key(), key)) return it;
  }
  return obj.end();
}

// A NodeNames array read straight off the parser: the names, and the first element that is
// not a string (index and JSON type name), if any.
struct StreamedNames {
  std::vector<std::string> names;
  int64_t bad_index = -1;
  const char* bad_type = nullptr;
};

// SAX handler (nlohmann::json_sax) for ExtenderArgs. kube-scheduler sends every candidate
// node's name in NodeNames (5,000 names ≈ 80 KB at 5,000 nodes); building a DOM for them and
// copying them out again was the largest cost of /filter. This handler builds the DOM of
// everything else (Pod, Nodes, unknown keys — small) and, for a top-level key equal to
// "NodeNames" ignoring case whose value is an array, appends the strings to a reserved
// vector instead, leaving an empty array in the DOM as a marker. The result is decoded by the
// same rules as the DOM (exact key preferred, then the first case-insensitive match in key
// order; a later duplicate key replaces an earlier one), so behaviour matches
// json::parse + FindKeyIgnoringCase exactly (tests/scheduler/extender_args_test.cc checks
// that differentially).
class ArgsSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit ArgsSax(size_t body_size) : body_size_(body_size) {}

  bool null() { return Value(nullptr, "null"); }
  bool boolean(bool v) { return Value(v, "boolean"); }
  bool number_integer(number_integer_t v) { return Value(v, "number"); }
  bool number_unsigned(number_unsigned_t v) { return Value(v, "number"); }
  bool number_float(number_float_t v, const string_t&) { return Value(v, "number"); }
  bool binary(binary_t& v) { return Value(json::binary(v), "binary"); }
  bool string(string_t& v) {
    if (stream_ != nullptr && skip_depth_ == 0) {
      stream_->names.emplace_back(v);
      ++stream_index_;
      return true;
    }
    return Value(v, "string");  // a copy: v is the lexer's buffer
  }
  bool start_object(std::size_t) {
    if (!Deeper()) return false;
    if (stream_ != nullptr) return StreamNested("object");
    json* v = Insert(json::object());
    stack_.push_back(v);
    return true;
  }
  bool end_object() {
    --depth_;
    if (stream_ != nullptr) return EndNested();
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    if (!Deeper()) return false;
    if (stream_ != nullptr) return StreamNested("array");
    if (stack_.size() == 1 && capture_) {
      // NodeNames (any case) at the top level: stream it. A repeated key restarts it.
      capture_ = false;
      StreamedNames& s = streams_[key_];
      s = StreamedNames{};
      // About 16 bytes of body per name ("node-1234",) — a cheap upper bound.
      s.names.reserve(body_size_ / 16 + 1);
      (*stack_.back())[key_] = json::array();
      stream_ = &s;
      stream_index_ = 0;
      skip_depth_ = 0;
      return true;
    }
    json* v = Insert(json::array());
    stack_.push_back(v);
    return true;
  }
  bool end_array() {
    --depth_;
    if (stream_ != nullptr) {
      if (skip_depth_ > 0) return EndNested();
      stream_ = nullptr;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) {
    if (stream_ != nullptr) return true;  // inside a skipped element of NodeNames
    key_ = k;                             // a copy: k is the lexer's buffer
    capture_ = stack_.size() == 1 && IEquals(key_, "NodeNames");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  json& root() { return root_; }
  // The document nested deeper than core::kMaxJsonDepth (parsing stopped there).
  bool too_deep() const { return too_deep_; }
  // The streamed array stored under exactly `key`, or nullptr when that key holds a DOM value.
  StreamedNames* streamed(const std::string& key) {
    auto it = streams_.find(key);
    return it == streams_.end() ? nullptr : &it->second;
  }

 private:
  // One more open object/array; false (stop parsing) past core::kMaxJsonDepth.
  bool Deeper() {
    if (++depth_ > core::kMaxJsonDepth) too_deep_ = true;
    return !too_deep_;
  }
  // A scalar value: in NodeNames it is a type error (first one kept); elsewhere a DOM value.
  template <typename T>
  bool Value(const T& v, const char* type) {
    if (stream_ != nullptr) {
      if (skip_depth_ == 0) {
        NoteBad(type);
        ++stream_index_;
      }
      return true;
    }
    Insert(json(v));
    return true;
  }
  json* Insert(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    // A top-level key that now holds a DOM value no longer holds a streamed array.
    if (stack_.size() == 1 && capture_) {
      capture_ = false;
      streams_.erase(key_);
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  void NoteBad(const char* type) {
    if (stream_->bad_type == nullptr) {
      stream_->bad_type = type;
      stream_->bad_index = stream_index_;
    }
  }
  // An object or array inside NodeNames: a type error; its contents are skipped.
  bool StreamNested(const char* type) {
    if (skip_depth_ == 0) {
      NoteBad(type);
      ++stream_index_;
    }
    ++skip_depth_;
    return true;
  }
  bool EndNested() {
    --skip_depth_;
    return true;
  }

  size_t body_size_;
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool capture_ = false;  // key_ is a top-level NodeNames (any case) awaiting its value
  std::map<std::string, StreamedNames> streams_;  // exact key → streamed array
  StreamedNames* stream_ = nullptr;               // the array being streamed, if any
  int64_t stream_index_ = 0;
  int skip_depth_ = 0;  // nesting inside a non-string element of the streamed array
  int depth_ = 0;       // open objects/arrays
  bool too_deep_ = false;
};

// ---- fast path ----
//
// nlohmann's lexer costs ~7 ns per byte (it copies every byte twice, for the value and for
// error messages): ~0.4 ms for the NodeNames of 5,000 nodes, a third of /filter's CPU. In
// kube-scheduler's requests every NodeNames element is a plain ASCII DNS name, so a simple
// scanner can take those arrays out of the body exactly; the rest (Pod, Nodes, small) is then
// parsed as before. The scanner accepts only what it can decide exactly — a top-level object
// whose NodeNames-keyed (any case) array values hold strings of printable ASCII without
// escapes — and answers "use the general path" for anything else (escapes, non-ASCII,
// non-string elements, odd structure), so every error and every unusual input goes through
// the SAX handler above. Equivalence: a replaced array is valid JSON in a value position, so
// the rest is valid iff the body is, and decodes to the same members.

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct FastScan {
  std::string rest;  // body with each NodeNames array replaced by []
  std::map<std::string, std::vector<std::string>> by_key;  // exact key → names of its last array
};

class Scanner {
 public:
  explicit Scanner(std::string_view body) : b_(body) {}

  // Fills `out` and returns true when the body is a top-level object whose NodeNames arrays
  // (at least one) are all simple; false = take the general path.
  bool Run(FastScan* out) {
    size_t i = Ws(0);
    if (i >= b_.size() || b_[i] != '{') return false;
    i = Ws(i + 1);
    size_t copied = 0;  // body bytes [0, copied) are in out->rest
    bool any = false;
    if (i < b_.size() && b_[i] == '}') return false;  // empty object: nothing to gain
    for (;;) {
      if (i >= b_.size() || b_[i] != '"') return false;
      size_t key_end = i + 1;
      while (key_end < b_.size() && b_[key_end] != '"' && b_[key_end] != '\\') ++key_end;
      if (key_end >= b_.size() || b_[key_end] != '"') return false;  // escaped key: general path
      std::string_view key = b_.substr(i + 1, key_end - i - 1);
      i = Ws(key_end + 1);
      if (i >= b_.size() || b_[i] != ':') return false;
      i = Ws(i + 1);
      if (i >= b_.size()) return false;
      if (b_[i] == '[' && IEquals(key, "NodeNames")) {
        std::vector<std::string> names;
        size_t end = SimpleStringArray(i, &names);
        if (end == std::string_view::npos) return false;
        if (!any) out->rest.reserve(b_.size() / 8 + 64);
        out->rest.append(b_.data() + copied, i - copied);
        out->rest += "[]";
        copied = end;
        out->by_key[std::string(key)] = std::move(names);
        any = true;
        i = end;
      } else {
        i = SkipValue(i);
        if (i == std::string_view::npos) return false;
      }
      i = Ws(i);
      if (i >= b_.size()) return false;
      if (b_[i] == ',') {
        i = Ws(i + 1);
        continue;
      }
      if (b_[i] != '}') return false;
      if (Ws(i + 1) != b_.size()) return false;  // trailing bytes: let the parser say so
      break;
    }
    if (!any) return false;
    out->rest.append(b_.data() + copied, b_.size() - copied);
    return true;
  }

 private:
  size_t Ws(size_t i) const {
    while (i < b_.size() && IsJsonSpace(b_[i])) ++i;
    return i;
  }
  // `[` at i: an array of strings of bytes 0x20–0x7E other than '"' and '\\' (no escapes).
  // Returns the index after `]`, or npos.
  size_t SimpleStringArray(size_t i, std::vector<std::string>* names) const {
    names->reserve(b_.size() / 10 + 1);  // ≥ the count for names of 8+ bytes ("node-1234",)
    i = Ws(i + 1);
    if (i < b_.size() && b_[i] == ']') return i + 1;
    for (;;) {
      if (i >= b_.size() || b_[i] != '"') return std::string_view::npos;
      size_t start = ++i;
      while (i < b_.size()) {
        unsigned char c = static_cast<unsigned char>(b_[i]);
        if (c < 0x20 || c > 0x7e || c == '\\') return std::string_view::npos;
        if (c == '"') break;
        ++i;
      }
      if (i >= b_.size()) return std::string_view::npos;
      names->emplace_back(b_.data() + start, i - start);
      i = Ws(i + 1);
      if (i >= b_.size()) return std::string_view::npos;
      if (b_[i] == ']') return i + 1;
      if (b_[i] != ',') return std::string_view::npos;
      i = Ws(i + 1);
    }
  }
  // The end of the value starting at i, tracking only strings and nesting (the parser
  // validates it later); npos when the body ends first.
  size_t SkipValue(size_t i) const {
    int depth = 0;
    for (; i < b_.size(); ++i) {
      char c = b_[i];
      if (c == '"') {
        for (++i; i < b_.size() && b_[i] != '"'; ++i) {
          if (b_[i] == '\\') ++i;
        }
        if (i >= b_.size()) return std::string_view::npos;
        if (depth == 0) return i + 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return i;  // a scalar ended by its container
        if (--depth == 0) return i + 1;
      } else if (depth == 0 && (c == ',' || IsJsonSpace(c))) {
        return i;
      }
    }
    return depth == 0 ? i : std::string_view::npos;
  }

  std::string_view b_;
};

}  // namespace

const json* FindKeyIgnoringCase(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto exact = obj.find(key);
  if (exact != obj.end()) return &*exact;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (IEquals(it.key(), key)) return &*it;
  }
  return nullptr;
}

bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view part =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!IsDns1123Label(part)) return false;  // each dot-separated part is a label
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

namespace {

// The value for an error message: quoted, control bytes as '?', cut at 80 bytes.
std::string Shown(std::string_view v) {
  std::string out = "\"";
  for (char c : v.substr(0, 80))
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == '"' ? '?' : c);
  return out + (v.size() > 80 ? "…\"" : "\"");
}

}  // namespace

Status CheckName(std::string_view value, const std::string& field, NameRule rule) {
  if (rule == NameRule::kLabel ? IsDns1123Label(value) : IsDns1123Subdomain(value))
    return Status::Ok();
  return InvalidArgument(
      field + " " + Shown(value) +
      (rule == NameRule::kLabel
           ? " is not a DNS-1123 label (at most 63 characters a-z, 0-9 and '-', starting and "
             "ending with a letter or digit)"
           : " is not a DNS-1123 subdomain (at most 253 characters: DNS-1123 labels joined by "
             "'.')"));
}

Status CheckUid(std::string_view value, const std::string& field) {
  bool ok = !value.empty() && value.size() <= 128;
  for (char c : value) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.');
  }
  if (ok) return Status::Ok();
  return InvalidArgument(
      field + " " + Shown(value) +
      (value.empty() ? " is required (the pod's metadata.uid)"
                     : " is not a UID (1 to 128 characters a-z, A-Z, 0-9, '-', '_' and '.')"));
}

namespace {

Status CheckNodeNames(const std::vector<std::string>& names, const std::string& field) {
  for (size_t i = 0; i < names.size(); ++i) {
    // The field's name (with its index) is built only for the error: thousands of names a
    // request, and the string was an allocation each.
    if (IsDns1123Subdomain(names[i])) continue;
    return CheckName(names[i], field + "[" + std::to_string(i) + "]", NameRule::kSubdomain);
  }
  return Status::Ok();
}

// The pod of a filter/prioritize call: metadata.name (DNS-1123 subdomain), metadata.namespace
// (label) and metadata.uid when present must be valid; kube-scheduler always sends all three.
Status CheckPodIdentity(const json& pod) {
  auto md = pod.find("metadata");
  if (md == pod.end() || !md->is_object()) return Status::Ok();
  struct Field {
    const char* key;
    NameRule rule;
    bool uid;
  } fields[] = {{"name", NameRule::kSubdomain, false},
                {"namespace", NameRule::kLabel, false},
                {"uid", NameRule::kLabel, true}};
  for (const auto& f : fields) {
    auto it = md->find(f.key);
    if (it == md->end() || it->is_null()) continue;
    std::string where = std::string("ExtenderArgs.Pod.metadata.") + f.key;
    if (!it->is_string())
      return InvalidArgument(where + " must be a string, got " + it->type_name());
    const std::string& v = it->get_ref<const std::string&>();
    FRACGPU_RETURN_IF_ERROR(f.uid ? CheckUid(v, where) : CheckName(v, where, f.rule));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateExtenderArgs(const ExtenderArgs& args) {
  FRACGPU_RETURN_IF_ERROR(core::CheckObjectMetaStrings(args.pod, "ExtenderArgs.Pod"));
  FRACGPU_RETURN_IF_ERROR(CheckPodIdentity(args.pod));
  return CheckNodeNames(
      args.node_names, args.had_nodes_list ? "ExtenderArgs.Nodes.items" : "ExtenderArgs.NodeNames");
}

Result<ExtenderArgs> DecodeExtenderArgs(const std::string& body) {
  FastScan fast;
  const bool simple = Scanner(body).Run(&fast);
  const std::string& text = simple ? fast.rest : body;
  ArgsSax sax(simple ? 0 : body.size());
  bool parsed = false;
  try {
    parsed = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true);
  } catch (const json::exception&) {
    parsed = false;  // sax_parse reports errors through parse_error; this is belt and braces
  }
  if (sax.too_deep()) {
    return InvalidArgument("ExtenderArgs body nests objects/arrays deeper than " +
                           std::to_string(core::kMaxJsonDepth) + " levels");
  }
  if (!parsed) return InvalidArgument("ExtenderArgs body is not valid JSON");
  json& j = sax.root();
  if (!j.is_object())
    return InvalidArgument(std::string("ExtenderArgs must be a JSON object, got ") + j.type_name());
  ExtenderArgs out;
  auto pod = FindIgnoringCase(j, "Pod");
  if (pod == j.end() || !pod->is_object()) {
    return InvalidArgument(std::string("ExtenderArgs.Pod must be an object, got ") +
                           (pod == j.end() ? "nothing" : pod->type_name()));
  }
  out.pod = std::move(*pod);
  auto names = FindIgnoringCase(j, "NodeNames");
  if (names != j.end() && !names->is_null()) {
    StreamedNames* streamed = sax.streamed(names.key());
    if (streamed == nullptr) {  // a DOM value: never an array (arrays are streamed)
      return InvalidArgument(
          std::string("ExtenderArgs.NodeNames must be an array of strings, got ") +
          names->type_name());
    }
    if (streamed->bad_type != nullptr) {
      return InvalidArgument("ExtenderArgs.NodeNames[" + std::to_string(streamed->bad_index) +
                             "] must be a string, got " + streamed->bad_type);
    }
    if (simple) {
      // Its value was an array, so the scanner took it out (and left [] in the DOM).
      auto it = fast.by_key.find(names.key());
      if (it != fast.by_key.end()) out.node_names = std::move(it->second);
    } else {
      out.node_names = std::move(streamed->names);
    }
    FRACGPU_RETURN_IF_ERROR(ValidateExtenderArgs(out));
    return out;
  }
  auto nodes = FindIgnoringCase(j, "Nodes");
  if (nodes != j.end() && !nodes->is_null()) {
    const json* items = FindKeyIgnoringCase(*nodes, "items");
    if (!nodes->is_object() || items == nullptr || !(items->is_array() || items->is_null())) {
      return InvalidArgument("ExtenderArgs.Nodes must be a NodeList with an items array");
    }
    out.had_nodes_list = true;
    const size_t count = items->is_array() ? items->size() : 0;
    out.node_names.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const json& n = (*items)[i];
      const json* md = FindKeyIgnoringCase(n, "metadata");
      const json* name = md != nullptr ? FindKeyIgnoringCase(*md, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return InvalidArgument("ExtenderArgs.Nodes.items[" + std::to_string(i) +
                               "].metadata.name must be a string");
      }
      out.node_names.push_back(name->get<std::string>());
    }
    FRACGPU_RETURN_IF_ERROR(ValidateExtenderArgs(out));
    out.nodes = std::move(*nodes);
    return out;
  }
  return InvalidArgument("ExtenderArgs carries neither NodeNames nor Nodes");
}

Result<ExtenderBindingArgs> DecodeExtenderBindingArgs(const std::string& body) {
  auto j = ParseObject(body, "ExtenderBindingArgs");
  if (!j.ok()) return j.status();
  ExtenderBindingArgs out;
  struct Field {
    const char* key;
    std::string* dst;
    bool required;
  } fields[] = {{"PodName", &out.pod_name, true},
                {"PodNamespace", &out.pod_namespace, true},
                {"PodUID", &out.pod_uid, true},
                {"Node", &out.node, true}};
  for (const auto& f : fields) {
    const json* v = FindKeyIgnoringCase(*j, f.key);
    if (v == nullptr || v->is_null()) {
      if (f.required)
        return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key + " is missing");
      continue;
    }
    if (!v->is_string()) {
      return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key +
                             " must be a string, got " + v->type_name());
    }
    *f.dst = v->get<std::string>();
    if (f.required && f.dst->empty())
      return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key + " is empty");
  }
  FRACGPU_RETURN_IF_ERROR(
      CheckName(out.pod_name, "ExtenderBindingArgs.PodName", NameRule::kSubdomain));
  FRACGPU_RETURN_IF_ERROR(
      CheckName(out.pod_namespace, "ExtenderBindingArgs.PodNamespace", NameRule::kLabel));
  FRACGPU_RETURN_IF_ERROR(CheckName(out.node, "ExtenderBindingArgs.Node", NameRule::kSubdomain));
  FRACGPU_RETURN_IF_ERROR(CheckUid(out.pod_uid, "ExtenderBindingArgs.PodUID"));
  return out;
}

}  // namespace fracgpu::scheduler
